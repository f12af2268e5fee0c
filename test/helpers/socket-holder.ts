// What systemd does for layoutd.socket, for a test: run under
// `systemd-socket-activate -l ADDR`, this process holds the listening socket
// (fd 3) without ever accepting on it, and runs `layoutd serve` on it, one
// agent at a time, as many times as it is told: on `restart` (a line on
// stdin) it stops the agent with SIGTERM, waits for it to exit, and starts
// the next with the same socket. It says each start and exit on stdout, one
// JSON line each. Every agent's output goes to the file named by argv[2];
// its environment is the JSON object in the file named by argv[3].
import { spawn, type ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import readline from 'node:readline'
import { MAIN_JS } from './agent-process.js'

const log = fs.openSync(process.argv[2] ?? '/dev/null', 'a')
const env = JSON.parse(fs.readFileSync(process.argv[3] ?? '', 'utf8')) as NodeJS.ProcessEnv
let agent: ChildProcess | null = null

function say(event: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(event)}\n`)
}

function start(): void {
  // systemd sets LISTEN_PID to the service's pid after its fork; the shell's
  // pid is node's, as it execs node.
  const child = spawn('/bin/sh', ['-c', 'LISTEN_PID=$$ exec "$0" "$1" serve', process.execPath, MAIN_JS], {
    env: { ...env, LISTEN_FDS: '1', LISTEN_FDNAMES: 'layoutd' },
    stdio: ['ignore', log, log, 3],
  })
  agent = child
  say({ event: 'started', pid: child.pid })
  child.once('exit', (code, signal) => say({ event: 'exited', pid: child.pid, code, signal }))
}

function stop(): Promise<void> {
  const child = agent
  if (child === null || child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => {
    child.once('exit', () => resolve())
    child.kill('SIGTERM')
  })
}

start()
for await (const line of readline.createInterface({ input: process.stdin })) {
  if (line === 'restart') {
    await stop()
    start()
  } else if (line === 'stop') {
    break
  }
}
await stop()
process.exit(0)
