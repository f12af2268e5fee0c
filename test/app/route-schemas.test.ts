// The app's Ajv does not check a schema against the JSON Schema
// meta-schema as it compiles it (src/app.ts: that check costs the first
// request after a start some 50 ms): this test does, for every schema a
// route validates a request with, so a malformed one still fails here.
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { test } from 'node:test'
import Fastify from 'fastify'
import { build, FakeAgent } from '../helpers/fake-agent.js'
import { Metrics } from '../../src/metrics/metrics.js'
import { agentIdentityRoutes } from '../../src/routes/agent-identity.js'
import { consoleRoutes } from '../../src/routes/console.js'
import { fleetPageRoutes } from '../../src/routes/fleet-page.js'
import { healthRoutes } from '../../src/routes/health.js'
import { layoutRoutes } from '../../src/routes/layout.js'
import { metricsRoutes } from '../../src/routes/metrics.js'
import { openApiRoutes } from '../../src/routes/openapi.js'
import { readyRoutes } from '../../src/routes/ready.js'
import { gateRoutes } from '../../src/routes/gate.js'
import { wakesRoutes } from '../../src/routes/wakes.js'

interface AjvLike {
  validateSchema(schema: unknown): boolean
  errorsText(errors?: unknown): string
  errors?: unknown
}

// The Ajv Fastify's compiler loads, with its defaults: the meta-schema check on.
const fromCompiler = createRequire(createRequire(import.meta.resolve('fastify')).resolve('@fastify/ajv-compiler'))
const Ajv = fromCompiler('ajv') as { default: new (opts: object) => AjvLike }

const PARTS = ['body', 'querystring', 'params', 'headers'] as const

void test('every schema a route checks a request with is valid JSON Schema, and every route of the app is seen', async (t) => {
  const app = Fastify()
  t.after(() => app.close())
  const seen: Array<{ route: string; part: string; schema: unknown }> = []
  const routes = new Set<string>()
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method]
    for (const m of methods) if (m !== 'HEAD') routes.add(`${m} ${route.url}`)
    const schema = route.schema as Record<string, unknown> | undefined
    for (const part of PARTS)
      if (schema?.[part] !== undefined)
        seen.push({ route: `${methods.join(',')} ${route.url}`, part, schema: schema[part] })
  })
  const api = new FakeAgent()
  await app.register(healthRoutes)
  await app.register(agentIdentityRoutes, { identity: undefined, token: '' })
  await app.register(readyRoutes, { api })
  await app.register(gateRoutes, { api })
  await app.register(layoutRoutes, { api })
  await app.register(wakesRoutes, { api })
  await app.register(metricsRoutes, { metrics: new Metrics() })
  await app.register(consoleRoutes, { api })
  await app.register(fleetPageRoutes, { store: undefined })
  await app.register(openApiRoutes, { document: () => Promise.resolve({}) })
  await app.ready()

  const ajv = new Ajv.default({ strict: false })
  assert.ok(seen.length >= 5, `only ${seen.length} request schemas seen`)
  for (const { route, part, schema } of seen) {
    assert.ok(ajv.validateSchema(schema), `${route} ${part}: ${ajv.errorsText(ajv.errors)}`)
  }

  // The same routes as the app's own document: a route plugin added to the app and not here fails.
  const { app: full } = await build(t)
  await full.ready()
  const doc = full.swagger() as { paths: Record<string, Record<string, unknown>> }
  const documented = new Set(
    Object.entries(doc.paths).flatMap(([p, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${p.replace(/\{(\w+)\}/g, ':$1')}`),
    ),
  )
  assert.deepEqual(
    [...routes].filter((r) => !documented.has(r)).sort(),
    [],
    'routes registered here the document does not name',
  )
  assert.deepEqual(
    [...documented].filter((r) => !routes.has(r)).sort(),
    [],
    'routes of the app this test does not register',
  )
})

void test('a schema the meta-schema refuses is refused by this check', () => {
  const ajv = new Ajv.default({ strict: false })
  assert.equal(ajv.validateSchema({ type: 'object', properties: { a: { type: 'no-such-type' } } }), false)
  assert.equal(ajv.validateSchema({ type: 'object', required: 'a' }), false)
})
