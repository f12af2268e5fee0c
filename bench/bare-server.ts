// The baseline of bench/all.ts: a bare Fastify server, in a process of its
// own as the agent is, answering with objects read once from files (the
// agent's own report and readiness answer), serialized on every request by
// the same response schemas the agent's routes declare. The comparison is
// of the work each request costs, so the server is made as the agent's is
// where that work is the framework's: the same request schemas (the
// readiness query, the report's If-None-Match header), the same Ajv
// options and server timeouts, a TCP socket on loopback. What it lacks is
// the agent's own work: its hooks, its logger, its handlers. Prints its port.
//
//   node dist/bench/bare-server.js REPORT.json READY.json
import fs from 'node:fs'
import Fastify from 'fastify'
import Type from 'typebox'
import { ReadyBody } from '../src/agent-api.js'
import { AJV_OPTIONS, DEFAULT_TIMEOUTS } from '../src/app.js'
import { LayoutReport, LegState } from '../src/domain/schemas.js'
import { StatusHeaders } from '../src/routes/layout.js'
import { ReadyQuery } from '../src/routes/ready.js'

const [reportFile = '', readyFile = ''] = process.argv.slice(2)
const report: unknown = JSON.parse(fs.readFileSync(reportFile, 'utf8'))
const ready: unknown = JSON.parse(fs.readFileSync(readyFile, 'utf8'))
const ReportBody = Type.Object({ ...LayoutReport.properties, leg: LegState }, { additionalProperties: false })
const ETAG = '"bare.1"'

const app = Fastify({
  logger: false,
  connectionTimeout: DEFAULT_TIMEOUTS.connectionMs,
  requestTimeout: DEFAULT_TIMEOUTS.requestMs,
  keepAliveTimeout: DEFAULT_TIMEOUTS.keepAliveMs,
  ajv: { customOptions: AJV_OPTIONS },
})
app.get('/status', { schema: { headers: StatusHeaders, response: { 200: ReportBody } } }, () => report)
app.get(
  '/status304',
  { schema: { headers: StatusHeaders, response: { 200: ReportBody, 304: Type.Null() } } },
  (request, reply) => {
    void reply.header('etag', ETAG)
    if (request.headers['if-none-match'] === ETAG) return reply.code(304).send()
    return report
  },
)
app.get('/ready', { schema: { querystring: ReadyQuery, response: { 200: ReadyBody } } }, () => ready)

const address = await app.listen({ host: '127.0.0.1', port: 0 })
process.stdout.write(`${new URL(address).port}\n`)
process.once('SIGTERM', () => void app.close().then(() => process.exit(0)))
