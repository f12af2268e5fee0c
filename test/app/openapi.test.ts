import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { test } from 'node:test'
import { parse } from 'yaml'
import { buildApp } from '../../src/app.js'
import { createLogger } from '../../src/logger.js'
import { Metrics } from '../../src/metrics/metrics.js'
import { generateOpenApi, openApiDocument } from '../../src/openapi.js'
import { liftComponents } from '../../src/routes/openapi.js'
import { build, FakeAgent } from '../helpers/fake-agent.js'

// Compiled to <outDir>/test/app/: the repository root is three levels up.
const COMMITTED = new URL('../../../openapi.yaml', import.meta.url)

void test('openapi.yaml is what the route schemas generate', async () => {
  const committed = await readFile(COMMITTED, 'utf8')
  const generated = await generateOpenApi()
  assert.ok(
    generated === committed,
    'openapi.yaml drifted from the route schemas: run `npm run build && npm run openapi` and commit it',
  )
})

type Node = Record<string, unknown>

function isNode(v: unknown): v is Node {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

const PREFIX = '#/components/schemas/'

/**
 * Every property of every object schema, wherever it is nested, without a
 * description; a property that is a `$ref` is described by the component
 * it names, which must exist.
 */
function undescribed(schema: unknown, at: string, components: Node, out: string[]): string[] {
  if (Array.isArray(schema)) schema.forEach((s, i) => undescribed(s, `${at}[${i}]`, components, out))
  if (!isNode(schema)) return out
  if (isNode(schema.properties)) {
    for (const [name, prop] of Object.entries(schema.properties)) {
      if (!isNode(prop)) out.push(`${at}.${name}`)
      else if (typeof prop.$ref === 'string') {
        const target = components[prop.$ref.slice(PREFIX.length)]
        if (!prop.$ref.startsWith(PREFIX) || !isNode(target) || typeof target.description !== 'string')
          out.push(`${at}.${name} (${prop.$ref})`)
      } else if (typeof prop.description !== 'string') out.push(`${at}.${name}`)
    }
  }
  for (const [k, v] of Object.entries(schema)) undescribed(v, `${at}.${k}`, components, out)
  return out
}

/** Every `$ref` in the document. */
function refs(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) node.forEach((n) => refs(n, out))
  else if (isNode(node)) {
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') out.push(v)
      else refs(v, out)
    }
  }
  return out
}

async function documentOf(): Promise<{ paths: Node; components: Node; schemas: Node; doc: Node }> {
  const doc: unknown = parse(await generateOpenApi())
  assert.ok(isNode(doc) && isNode(doc.paths) && isNode(doc.components) && isNode(doc.components.schemas))
  return { doc, paths: doc.paths, components: doc.components, schemas: doc.components.schemas }
}

void test('every operation has an operationId, a summary, a description, tags, its security and a 4xx; every field a description', async () => {
  const { paths, schemas } = await documentOf()
  const ids = new Set<string>()
  let operations = 0
  for (const [path, item] of Object.entries(paths)) {
    assert.ok(isNode(item))
    for (const [method, op] of Object.entries(item)) {
      operations++
      const where = `${method.toUpperCase()} ${path}`
      assert.ok(isNode(op), where)
      assert.equal(typeof op.operationId, 'string', `${where} operationId`)
      assert.ok(!ids.has(String(op.operationId)), `${where}: operationId ${String(op.operationId)} is not unique`)
      ids.add(String(op.operationId))
      assert.equal(typeof op.summary, 'string', `${where} summary`)
      assert.equal(typeof op.description, 'string', `${where} description`)
      assert.ok(Array.isArray(op.tags) && op.tags.length > 0, `${where} tags`)
      // A change takes the bearer token; a read says, by an empty list, that it takes none; GET /agent
      // (where the data root is) takes it from beyond loopback, so it lists both.
      const security = method !== 'get' ? [{ bearer: [] }] : path === '/agent' ? [{}, { bearer: [] }] : []
      assert.deepEqual(op.security, security, `${where} security`)
      assert.ok(isNode(op.responses) && isNode(op.responses['500']), `${where} documents its 500`)
      assert.ok(
        Object.keys(op.responses).some((s) => s.startsWith('4')),
        `${where} documents a 4xx`,
      )
      for (const p of Array.isArray(op.parameters) ? op.parameters : []) {
        assert.ok(isNode(p) && typeof p.description === 'string', `${where} parameter ${JSON.stringify(p)}`)
      }
      assert.deepEqual(undescribed(op.responses, where, schemas, []), [], `${where}: fields without a description`)
    }
  }
  assert.ok(operations >= 13, `operations: ${operations}`)
  for (const [name, schema] of Object.entries(schemas)) {
    assert.ok(isNode(schema) && typeof schema.description === 'string', `component ${name} has a description`)
    assert.deepEqual(
      undescribed({ properties: { [name]: schema } }, 'components', schemas, []),
      [],
      `component ${name}: fields without a description`,
    )
  }
})

void test('shared schemas are components, referred to with $ref; the bearer scheme is declared', async () => {
  const { doc, components, schemas } = await documentOf()
  const used = refs(doc)
  for (const ref of used)
    assert.ok(ref.startsWith(PREFIX) && ref.slice(PREFIX.length) in schemas, `${ref} names a component`)
  const count = (name: string): number => used.filter((r) => r === `${PREFIX}${name}`).length
  // The error body is written once and referred to by every error answer.
  assert.ok(count('ErrorDetail') >= 30, `ErrorDetail is referred to ${count('ErrorDetail')} times`)
  for (const name of [
    'LegState',
    'LegRun',
    'Result',
    'RowReport',
    'WakeGrant',
    'WakeRefusal',
    'Readiness',
    'ReadyCheck',
  ]) {
    assert.ok(count(name) >= 1, `${name} is a component in use`)
  }
  // A component never holds a copy of another: LegState refers to LegRun, which refers to Result.
  assert.match(JSON.stringify(schemas.LegState), /"\$ref":"#\/components\/schemas\/LegRun"/)
  assert.match(JSON.stringify(schemas.LegRun), /"\$ref":"#\/components\/schemas\/Result"/)
  assert.ok(isNode(components.securitySchemes))
  assert.deepEqual(components.securitySchemes.bearer, {
    type: 'http',
    scheme: 'bearer',
    description:
      'Every change needs it, from loopback too: CARLOS_AGENT_TOKEN, the file CARLOS_AGENT_TOKEN_FILE ' +
      'names, or the one the agent makes at its first start in D/agent.token (0600).',
  })
})

void test('two different schemas under one title are refused rather than written as one', () => {
  const schema = (type: string): Node => ({ type: 'object', title: 'Same', properties: { a: { type } } })
  const doc = {
    paths: { '/x': { get: { responses: { 200: { content: { 'application/json': { schema: schema('string') } } } } } } },
  }
  const lifted = liftComponents(doc)
  assert.deepEqual((lifted.components as Node).schemas, { Same: schema('string') })
  const twice = {
    paths: {
      ...doc.paths,
      '/y': { get: { responses: { 200: { content: { 'application/json': { schema: schema('number') } } } } } },
    },
  }
  assert.throws(() => liftComponents(twice), /two different schemas are titled Same/)
})

void test('GET /openapi.json serves the document openapi.yaml holds', async (t) => {
  const { app } = await build(t)
  const res = await app.inject({ method: 'GET', url: '/openapi.json' })
  assert.equal(res.statusCode, 200)
  assert.match(String(res.headers['content-type']), /^application\/json/)
  assert.deepEqual(res.json(), parse(await readFile(COMMITTED, 'utf8')))
})

void test('an app handed its document registers no swagger, and makes the same document once, on the first ask', async (t) => {
  const metrics = new Metrics()
  let made = 0
  const app = await buildApp({
    api: new FakeAgent(),
    metrics,
    logger: createLogger('silent'),
    token: '',
    document: () => {
      made++
      return openApiDocument(metrics)
    },
  })
  t.after(() => app.close())
  await app.ready()
  assert.equal(app.hasDecorator('swagger'), false)
  assert.equal(made, 0)
  const committed: unknown = parse(await readFile(COMMITTED, 'utf8'))
  for (let i = 0; i < 2; i++) {
    const res = await app.inject({ method: 'GET', url: '/openapi.json' })
    assert.equal(res.statusCode, 200)
    assert.deepEqual(res.json(), committed)
  }
  assert.equal(made, 1)
})

void test('a document that could not be made is made again on the next ask', async (t) => {
  let asks = 0
  const app = await buildApp({
    api: new FakeAgent(),
    metrics: new Metrics(),
    logger: createLogger('silent'),
    token: '',
    document: () => (++asks === 1 ? Promise.reject(new Error('not this time')) : Promise.resolve({ openapi: '3.1.0' })),
  })
  t.after(() => app.close())
  assert.equal((await app.inject({ method: 'GET', url: '/openapi.json' })).statusCode, 500)
  const res = await app.inject({ method: 'GET', url: '/openapi.json' })
  assert.equal(res.statusCode, 200)
  assert.deepEqual(res.json(), { openapi: '3.1.0' })
})
