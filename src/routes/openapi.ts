// The OpenAPI document from the routes' own schemas: its head, the shared
// schemas in `components`, and `GET /openapi.json`; `openapi.yaml` is it, committed.
import { readFile } from 'node:fs/promises'
import { isDeepStrictEqual } from 'node:util'
import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger'
import type { FastifyPluginCallbackTypebox } from '@fastify/type-provider-typebox'
import { Type } from '../domain/typebox.js'
import { commonErrors, parserErrors } from './error-envelope.js'

type Node = Record<string, unknown>

function isNode(v: unknown): v is Node {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

const COMPONENTS = '#/components/schemas/'

/** A schema with a `title` goes under `components.schemas`, a `$ref` where it stood; two under one title throw. */
export function liftComponents(doc: Node): Node {
  const components: Node = {}
  const lift = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(lift)
    if (!isNode(node)) return node
    const out: Node = {}
    for (const [k, v] of Object.entries(node)) out[k] = lift(v)
    const title = out.title
    if (typeof title !== 'string' || typeof out.type !== 'string') return out
    if (title in components && !isDeepStrictEqual(components[title], out))
      throw new Error(`two different schemas are titled ${title}`)
    components[title] = out
    return { $ref: `${COMPONENTS}${title}` }
  }
  const paths = lift(doc.paths)
  const existing = isNode(doc.components) ? doc.components : {}
  const schemas = { ...(isNode(existing.schemas) ? existing.schemas : {}), ...components }
  const sorted = Object.fromEntries(Object.entries(schemas).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
  return { ...doc, paths, components: { ...existing, schemas: sorted } }
}

interface PackageHead {
  version: string
  license?: string
}

// Read once per process: every app built shares it.
let head: Promise<PackageHead> | undefined

/** From package.json, three levels above the compiled file. */
function packageHead(): Promise<PackageHead> {
  return (head ??= readFile(new URL('../../../package.json', import.meta.url), 'utf8').then((text) => {
    const pkg = JSON.parse(text) as { version?: unknown; license?: unknown }
    if (typeof pkg.version !== 'string') throw new Error('package.json has no version')
    return { version: pkg.version, ...(typeof pkg.license === 'string' ? { license: pkg.license } : {}) }
  }))
}

/** Registered before any route, so it sees every one. */
export async function openApiOptions(): Promise<FastifyDynamicSwaggerOptions> {
  const { version, license } = await packageHead()
  return {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'layoutd',
        version,
        description:
          'The layout agent of one box: moves sleeping tenant instances between the flat and nested layouts ' +
          'and converges to the recorded intent. ' +
          'Errors are `{"error": {"code", "message"}}`.',
        ...(license === undefined ? {} : { license: { name: license, identifier: license } }),
      },
      servers: [{ url: 'http://127.0.0.1:9740', description: 'The default listen address (`CARLOS_AGENT_LISTEN`).' }],
      tags: [
        { name: 'layout', description: 'The status report, converge and mint.' },
        { name: 'activator', description: 'What the activator asks before it wakes an instance.' },
        { name: 'health', description: 'Liveness and metrics.' },
        { name: 'console', description: 'The console page, for a person in a browser, and this document.' },
      ],
      components: {
        securitySchemes: {
          bearer: {
            type: 'http',
            scheme: 'bearer',
            description:
              'Every change needs it, from loopback too: CARLOS_AGENT_TOKEN, the file CARLOS_AGENT_TOKEN_FILE ' +
              'names, or the one the agent makes at its first start in D/agent.token (0600).',
          },
        },
      },
    },
    transformObject: (doc) => {
      if (!('openapiObject' in doc)) throw new Error('the document is OpenAPI 3, never Swagger 2')
      return liftComponents(doc.openapiObject)
    },
  }
}

export interface OpenApiRoutesOptions {
  document: () => Promise<unknown>
}

export const openApiRoutes: FastifyPluginCallbackTypebox<OpenApiRoutesOptions> = (app, { document }, done) => {
  // Made once and kept: the routes do not change while the app runs. A failure is made again next time.
  let made: Promise<unknown> | undefined
  const once = (): Promise<unknown> =>
    (made ??= document().catch((err: unknown) => {
      made = undefined
      throw err
    }))
  app.get(
    '/openapi.json',
    {
      schema: {
        operationId: 'getOpenApi',
        summary: 'This API, described',
        description:
          'The OpenAPI 3.1 document of every route, made from the schemas the routes validate and answer with; ' +
          '`openapi.yaml` is the same document.',
        tags: ['console'],
        security: [],
        response: {
          200: {
            description: 'The OpenAPI document.',
            content: {
              'application/json': {
                schema: Type.Object({}, { additionalProperties: true, description: 'An OpenAPI 3.1 document.' }),
              },
            },
          },
          ...parserErrors,
          500: commonErrors[500],
        },
      },
    },
    async () => (await once()) as Record<string, unknown>,
  )
  done()
}
