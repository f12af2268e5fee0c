// A decoy layoutd for the suite's isolation check: it listens on
// 127.0.0.1:9740 (the agent's default address) and answers every request
// 200 with JSON, as an agent of some other data root would (`GET /agent`
// names /decoy/other-box/data; a report, a mint, a run in the same body).
// With it up, a full `npm test` must pass as it does without: no test may
// dial the default port, and a CLI that falls back to it refuses the decoy
// (agent_other_data_root) instead of taking its answers.
//
//   node scripts/decoy-agent.mjs [host:port]     (default 127.0.0.1:9740)
//   ./nodew npm test                             (in another shell)
//
// Every request it gets is printed on stderr: any line there is a test that
// reached outside its sandbox. Ctrl-C stops it.
import http from 'node:http'
import process from 'node:process'

const listen = process.argv[2] ?? '127.0.0.1:9740'
const at = listen.lastIndexOf(':')
const host = listen.slice(0, at).replace(/^\[(.*)\]$/, '$1')
const port = Number(listen.slice(at + 1))

const FOREIGN = '/decoy/other-box/data'
const now = new Date().toISOString()
// One body for every path: the fields each of the agent's answers is read by.
const body = JSON.stringify({
  dataDir: FOREIGN,
  pid: process.pid,
  startId: 'decoy',
  startedAt: now,
  ready: true,
  phase: 'ready',
  checks: [],
  nested: { allowed: true, reason: '' },
  mode: 'flat',
  box: 'decoy-box',
  default: false,
  defaultBlocked: '',
  rows: { 'decoy.example.com': { layout: 'flat', reason: '', note: 'answered by the decoy' } },
  leg: { running: false, pending: false, lastRun: null, retryAt: null },
  warnings: ['this is the decoy of scripts/decoy-agent.mjs, not an agent of this data root'],
})

let asked = 0
const server = http.createServer((req, res) => {
  asked++
  process.stderr.write(`decoy: ${req.method} ${req.url} from ${req.socket.remoteAddress}:${req.socket.remotePort}\n`)
  req.resume()
  res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' })
  res.end(body)
})
server.on('error', (err) => {
  process.stderr.write(`decoy: cannot listen on ${listen}: ${err.message}\n`)
  process.exit(1)
})
server.listen(port, host, () => {
  process.stderr.write(`decoy: listening on ${listen}, answering as the agent of ${FOREIGN}\n`)
})
process.on('SIGINT', () => {
  process.stderr.write(`decoy: ${asked} request${asked === 1 ? '' : 's'} answered\n`)
  server.close(() => process.exit(asked === 0 ? 0 : 1))
})
