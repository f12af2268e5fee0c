// The machine's own floor for an answer through a converge: a server that
// does nothing but answer, `node:http` in a process of its own, every GET
// answered 200 with a small JSON body, as `/ready/:host` is answered.
// bench/ready-during-converge.ts asks it at the same rate, through the
// same converge, beside the agent: what it waits is what the machine (the
// converge's I/O, the other processes) makes any answering thread wait,
// with none of the agent's own work. Prints its port.
//
//   node dist/bench/bare-ready.js
import http from 'node:http'

const BODY = '{"ready":true}'

const server = http.createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': BODY.length })
  res.end(BODY)
})
server.listen(0, '127.0.0.1', () => {
  const address = server.address()
  process.stdout.write(`${typeof address === 'object' && address !== null ? address.port : 0}\n`)
})
process.on('SIGTERM', () => server.close(() => process.exit(0)))
