// Restarts that refuse nothing (design §4.6): the listening socket is held
// across agents as systemd holds layoutd.socket (systemd-socket-activate
// makes it; test/helpers/socket-holder.ts keeps it and runs one agent after
// another on it), while GET /ready/:host is asked about 400 times a
// second, half on keep-alive connections and half on a new connection
// each. Over 5 restarts no request fails to connect or is reset; each is
// answered 200, or 503 `starting` with Retry-After while recovery runs.
// The longest wait is printed (a figure, not a check).
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import http from 'node:http'
import path from 'node:path'
import readline from 'node:readline'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Pool } from 'undici'
import { flatPaths } from '../../src/domain/paths.js'
import { Registry } from '../../src/infra/registry.js'
import { freePort, makeSandbox, sandboxEnv } from '../helpers/agent-process.js'
import { spawnFor } from '../helpers/child.js'
import { tmpDir } from '../helpers/tmp.js'
import { until } from '../helpers/until.js'

const HOLDER = fileURLToPath(new URL('../helpers/socket-holder.js', import.meta.url))
const HOST = 'ok.example.com'
/** A host held by a hold marker on disk: its fence must survive every restart. */
const HELD = 'held.example.com'
const RESTARTS = 5
/** Requests a tick, each kind, every TICK_MS: about 400 a second in all, light enough for a loaded machine. */
const PER_TICK = 2
const TICK_MS = 10
/**
 * How long one request may go unanswered before it counts as an error: the
 * socket is held across restarts, so a request waits for the next agent, and
 * that start can take many seconds on a busy machine; never is a failure.
 */
const ANSWER_MS = 60_000

interface Tally {
  sent: number
  answered: Map<number, number>
  /** Requests that got no HTTP answer: refused, reset, or closed; each with its error code. */
  errors: string[]
  /** 503s without a Retry-After. */
  bareUnavailable: number
  longestMs: number
  /** The status and body of each kind of answer other than 200. */
  codes: Set<string>
}

function tally(): Tally {
  return { sent: 0, answered: new Map(), errors: [], bareUnavailable: 0, longestMs: 0, codes: new Set() }
}

function noteAnswer(t: Tally, started: number, status: number, retryAfter: unknown): void {
  t.answered.set(status, (t.answered.get(status) ?? 0) + 1)
  if (status === 503 && retryAfter === undefined) t.bareUnavailable++
  t.longestMs = Math.max(t.longestMs, performance.now() - started)
}

/** One request on a connection of its own (no agent: a new TCP connection each). */
function fresh(port: number, t: Tally): Promise<void> {
  const started = performance.now()
  t.sent++
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: `/ready/${HOST}`, agent: false }, (res) => {
      let body = ''
      res.setEncoding('utf8').on('data', (c: string) => (body += c))
      res.once('end', () => {
        if (res.statusCode !== 200) t.codes.add(`${res.statusCode} ${body}`)
        noteAnswer(t, started, res.statusCode ?? 0, res.headers['retry-after'])
        resolve()
      })
    })
    // An answer that never comes is an error of its own, not a wait without end.
    req.setTimeout(ANSWER_MS, () => req.destroy(Object.assign(new Error('no answer'), { code: 'NO_ANSWER' })))
    req.once('error', (err: NodeJS.ErrnoException) => {
      t.errors.push(err.code ?? err.message)
      resolve()
    })
  })
}

/** One request on the keep-alive pool. */
async function reused(pool: Pool, t: Tally): Promise<void> {
  const started = performance.now()
  t.sent++
  try {
    const res = await pool.request({ method: 'GET', path: `/ready/${HOST}` })
    await res.body.dump()
    noteAnswer(t, started, res.statusCode, res.headers['retry-after'])
  } catch (err) {
    t.errors.push((err as NodeJS.ErrnoException).code ?? String(err))
  }
}

void test(
  '5 restarts under ~400 req/s of GET /ready/:host: no connection refused or reset',
  // Ten starts of the agent under the load: over 240 s on a two-core machine under a load average near 20.
  { timeout: 480_000 },
  async (t) => {
    const root = await tmpDir(t, 'layoutd-restart-')
    const sb = await makeSandbox(root, 'restart-box')
    const registry = Registry.open(sb.dataDir)
    const p = flatPaths({ dataDir: sb.dataDir, runDir: path.join(sb.dataDir, 'run') }, HOST)
    await fs.mkdir(p.dir, { recursive: true })
    registry.add({ host: HOST, kind: 'instance', hibernate: true, ...p })
    const h = flatPaths({ dataDir: sb.dataDir, runDir: path.join(sb.dataDir, 'run') }, HELD)
    await fs.mkdir(h.dir, { recursive: true })
    registry.add({ host: HELD, kind: 'instance', hibernate: true, ...h })
    // A marker that does not read back stands until an operator removes it (design §4.2).
    await fs.mkdir(path.join(sb.dataDir, 'layout'), { recursive: true })
    await fs.writeFile(path.join(sb.dataDir, 'layout', `${HELD}.hold`), 'not a marker')
    registry.close()

    const port = await freePort()
    const log = path.join(root, 'agents.log')
    // The agents' environment, as the unit's EnvironmentFile= would give it: systemd-socket-activate passes its
    // child little of its own.
    const envFile = path.join(root, 'agent.env.json')
    await fs.writeFile(
      envFile,
      JSON.stringify(sandboxEnv(sb, { CARLOS_AGENT_LISTEN: `127.0.0.1:${port}`, CARLOS_LAYOUT_DEFAULT: 'flat' })),
    )
    // The holder, the socket holder under it and its agents are one process group, killed whole when the test
    // ends or times out: killing systemd-socket-activate alone would leave the agent serving on the port.
    const holder = spawnFor(
      t,
      'systemd-socket-activate',
      ['-l', `127.0.0.1:${port}`, '--', process.execPath, HOLDER, log, envFile],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    )
    const { stdin, stdout, stderr } = holder
    assert.ok(stdin !== null && stdout !== null && stderr !== null)
    let holderErr = ''
    stderr.setEncoding('utf8').on('data', (s: string) => (holderErr += s))
    const events = readline.createInterface({ input: stdout })
    const starts: number[] = []
    const exits: Array<{ code: number | null }> = []
    events.on('line', (line) => {
      const e = JSON.parse(line) as { event: string; pid: number; code: number | null }
      if (e.event === 'started') starts.push(e.pid)
      else exits.push({ code: e.code })
    })
    // systemd-socket-activate listens, then hands over on the first connection: the load's first request.
    await until('systemd-socket-activate listening', () => holderErr.includes('Listening on'))

    const keep = tally()
    const each = tally()
    const pool = new Pool(`http://127.0.0.1:${port}`, {
      connections: 8,
      pipelining: 1,
      headersTimeout: ANSWER_MS,
      bodyTimeout: ANSWER_MS,
    })
    t.after(() => pool.close())
    const inFlight = new Set<Promise<void>>()
    const track = (p: Promise<void>) => {
      inFlight.add(p)
      void p.finally(() => inFlight.delete(p))
    }
    let lastStatus = 0
    let lastBody = ''
    const load = setInterval(() => {
      for (let i = 0; i < PER_TICK; i++) {
        track(reused(pool, keep))
        track(fresh(port, each))
      }
    }, TICK_MS)
    const phases: Array<{ stopMs: number; readyMs: number }> = []
    /** The held host's code, asked of each agent once it is ready. */
    const heldCodes: string[] = []
    const ready = async (): Promise<void> => {
      for (const deadline = Date.now() + 60_000; Date.now() < deadline;) {
        const res = await pool.request({ method: 'GET', path: `/ready/${HOST}` }).catch(() => null)
        lastStatus = res?.statusCode ?? 0
        lastBody = (await res?.body.text()) ?? ''
        if (lastStatus === 200) {
          const held = await pool.request({ method: 'GET', path: `/ready/${HELD}` })
          heldCodes.push(`${held.statusCode} ${(JSON.parse(await held.body.text()) as { code: string }).code}`)
          return
        }
        await new Promise((r) => setTimeout(r, 20))
      }
      const agents = await fs.readFile(log, 'utf8').catch(() => '')
      assert.fail(
        `not ready within 60 s (last answer ${lastStatus} ${lastBody}); holder: ${holderErr}; ${agents.slice(-3000)}`,
      )
    }
    const started = performance.now()
    try {
      await ready()
      for (let i = 0; i < RESTARTS; i++) {
        const before = starts.length
        const asked = performance.now()
        stdin.write('restart\n')
        await until(`agent ${i + 2} started`, () => starts.length > before)
        const next = performance.now()
        await ready()
        // How long the old agent took to stop, and the next to answer 200 once started.
        phases.push({ stopMs: Math.round(next - asked), readyMs: Math.round(performance.now() - next) })
      }
    } finally {
      clearInterval(load)
      await Promise.all([...inFlight])
      stdin.write('stop\n')
    }
    const seconds = (performance.now() - started) / 1000
    const figure = {
      restarts: RESTARTS,
      seconds: Number(seconds.toFixed(1)),
      requests: keep.sent + each.sent,
      perSecond: Math.round((keep.sent + each.sent) / seconds),
      keepAlive: { sent: keep.sent, errors: keep.errors.length, answered: Object.fromEntries(keep.answered) },
      newConnection: { sent: each.sent, errors: each.errors.length, answered: Object.fromEntries(each.answered) },
      longestWaitMs: Math.round(Math.max(keep.longestMs, each.longestMs)),
      longestStopMs: Math.max(...phases.map((p) => p.stopMs)),
      longestToReadyMs: Math.max(...phases.map((p) => p.readyMs)),
    }
    t.diagnostic(JSON.stringify(figure))
    process.stdout.write(`restart: ${JSON.stringify(figure)}\n`)
    t.diagnostic([...each.codes].join('\n'))
    assert.equal(starts.length, RESTARTS + 1)
    assert.deepEqual(new Set(heldCodes), new Set(['409 hold_corrupt']), 'the hold stood through every restart')
    assert.equal(heldCodes.length, RESTARTS + 1)
    assert.ok(
      exits.slice(0, RESTARTS).every((e) => e.code === 0),
      `every agent exited cleanly: ${JSON.stringify(exits)}`,
    )
    assert.deepEqual([...keep.errors, ...each.errors], [], 'no request was refused, reset or left unanswered')
    assert.equal(keep.bareUnavailable + each.bareUnavailable, 0, 'every 503 carries Retry-After')
    for (const status of [...keep.answered.keys(), ...each.answered.keys()])
      assert.ok([200, 503].includes(status), `status ${status}`)
    assert.ok(
      (each.answered.get(503) ?? 0) + (keep.answered.get(503) ?? 0) > 0,
      'some requests met an agent still starting',
    )
  },
)
