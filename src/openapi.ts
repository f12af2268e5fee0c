// openapi.yaml is generated from the route schemas: `npm run openapi` prints
// it, and a test fails when the committed file drifts. It is `GET /openapi.json`, as YAML.
import { pathToFileURL } from 'node:url'
import type { AgentApi } from './agent-api.js'
import { buildApp, type App } from './app.js'
import { createLogger } from './logger.js'
import { Metrics } from './metrics/metrics.js'

// Schema-only stand-in: the routes are registered, never called.
function schemaOnly(): never {
  throw new Error('openapi.ts builds the app for its schemas only; nothing may call the agent')
}
const schemaOnlyApi: AgentApi = {
  readiness: schemaOnly,
  report: schemaOnly,
  reportTag: schemaOnly,
  reportSoon: schemaOnly,
  kick: schemaOnly,
  converge: schemaOnly,
  runUnderWay: schemaOnly,
  legState: schemaOnly,
  mint: schemaOnly,
  mintFor: schemaOnly,
  claimWake: schemaOnly,
  readyFor: schemaOnly,
  gate: schemaOnly,
  gateOf: schemaOnly,
  waitGate: schemaOnly,
  readyRetryAfter: schemaOnly,
  releaseWake: schemaOnly,
  replaceWakes: schemaOnly,
  wakes: schemaOnly,
}

/** An app for its schemas alone, which documents itself. */
async function withSchemaApp<T>(metrics: Metrics, read: (app: App) => T): Promise<T> {
  const app = await buildApp({ api: schemaOnlyApi, metrics, logger: createLogger('silent'), token: '' })
  try {
    await app.ready()
    return read(app)
  } finally {
    await app.close()
  }
}

export function generateOpenApi(): Promise<string> {
  return withSchemaApp(new Metrics(), (app) => app.swagger({ yaml: true }))
}

/**
 * `GET /openapi.json` of the agent, whose own app loads no swagger: the same document, made by an app
 * built for it. It is handed the agent's metrics, which an app only reads when a request is answered,
 * so no second set of process metrics is started.
 */
export function openApiDocument(metrics: Metrics): Promise<unknown> {
  return withSchemaApp(metrics, (app) => app.swagger())
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.stdout.write(await generateOpenApi())
}
