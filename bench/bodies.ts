// What unfinished request bodies cost the real agent (design §6): N
// connections (default 300) each send a PUT /wakes of 1 MiB less its last
// byte, and the agent's resident memory (VmRSS) is read before, 2 s after,
// and once every connection is closed again. Prints JSON. A figure, never
// a test's assertion: the machine's load moves it.
//
//   node dist/bench/bodies.js [--connections 300] [--bytes 1048576]
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { parseArgs } from 'node:util'
import { AgentProcess, makeSandbox } from '../test/helpers/agent-process.js'

function rssMiB(pid: number): number {
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]
  return Number(kb) / 1024
}

/**
 * One connection sending a PUT /wakes of `bytes` less its last byte, with the
 * agent's token (design §6: without it the agent refuses before reading any
 * body); resolves with what the agent answered so far.
 */
function unfinished(port: number, bytes: number, token: string): { socket: net.Socket; answer: () => string } {
  const socket = net.connect(port, '127.0.0.1')
  let answer = ''
  socket.setEncoding('utf8').on('data', (s: string) => (answer += s))
  socket.on('error', () => undefined)
  const head =
    `PUT /wakes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${bytes}\r\n\r\n`
  const open = '{"awake": ["'
  socket.write(head + open + 'a'.repeat(bytes - open.length - 1))
  return { socket, answer: () => answer }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { connections: { type: 'string', default: '300' }, bytes: { type: 'string', default: '1048576' } },
  })
  const n = Number(values.connections)
  const bytes = Number(values.bytes)
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'layoutd-bodies-'))
  const agent = await AgentProcess.start(await makeSandbox(root))
  try {
    await agent.waitReady()
    await delay(1000)
    const before = rssMiB(agent.pid)
    const port = Number(new URL(agent.url).port)
    const conns = Array.from({ length: n }, () => unfinished(port, bytes, agent.token))
    await delay(2000)
    const during = rssMiB(agent.pid)
    const refused = conns.filter((c) => / 503 /.test(c.answer().split('\r\n', 1)[0] ?? '')).length
    const unauthorised = conns.filter((c) => / 40[13] /.test(c.answer().split('\r\n', 1)[0] ?? '')).length
    if (unauthorised > 0) throw new Error(`${unauthorised} connections were refused their token: no body was read`)
    const closed = conns.filter((c) => c.socket.destroyed || c.socket.readyState === 'closed').length
    for (const c of conns) c.socket.destroy()
    await delay(5000)
    const after = rssMiB(agent.pid)
    const out = {
      connections: n,
      bodyBytes: bytes - 1,
      rssMiB: { before, during, afterClosed5s: after },
      refused503: refused,
      closedByAgent: closed,
      node: process.version,
      machine: { cpus: os.cpus().length, loadavg: os.loadavg(), shared: true },
    }
    process.stdout.write(`${JSON.stringify(out, null, 2)}\n`)
  } finally {
    await agent.kill()
    fs.rmSync(root, { recursive: true, force: true })
  }
}

await main()
