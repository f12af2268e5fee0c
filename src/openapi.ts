// openapi.yaml is generated from the route schemas: `npm run openapi` prints
// it, and a test fails when the committed file drifts. It is `GET /openapi.json`, as YAML.
import { pathToFileURL } from 'node:url'
import type { AgentApi } from './agent-api.js'
import { buildApp } from './app.js'
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

export async function generateOpenApi(): Promise<string> {
  const app = await buildApp({ api: schemaOnlyApi, metrics: new Metrics(), logger: createLogger('silent'), token: '' })
  try {
    await app.ready()
    return app.swagger({ yaml: true })
  } finally {
    await app.close()
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.stdout.write(await generateOpenApi())
}
