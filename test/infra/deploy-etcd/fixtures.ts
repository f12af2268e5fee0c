// What the etcd deploy store's tests share: one real etcd per test file
// (test/helpers/etcd.ts) with a prefix of its own for each store, a record
// builder, a logger that keeps its lines, a counter of watch callbacks, and
// an endpoint that accepts and never answers.
import fs from 'node:fs/promises'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { after, before, type TestContext } from 'node:test'
import type { Logger } from '../../../src/domain/ports.js'
import type { IntentRecord } from '../../../src/domain/schemas.js'
import { EtcdDeployStore, type EtcdStoreOptions } from '../../../src/infra/deploy-etcd/store.js'
import { EtcdServer } from '../../helpers/etcd.js'

/** A signal that never aborts. */
export const live = () => new AbortController().signal

export function rec(id: string, extra: Partial<IntentRecord> = {}): IntentRecord {
  return { id, mode: 'nested', force: false, recordedAt: '2026-11-30T08:01:02.123Z', by: 'ops@test', ...extra }
}

export interface SharedEtcd {
  /** The file's etcd (started by a before hook, killed by an after hook). */
  readonly server: EtcdServer
  /** A store on it under a prefix no other test uses, closed when the test ends. */
  storeFor(t: TestContext, endpoints?: string[], opts?: EtcdStoreOptions): { store: EtcdDeployStore; prefix: string }
}

/** One etcd for the tests of a file that do not stop it; call at the top level of the file. */
export function useSharedEtcd(): SharedEtcd {
  let server: EtcdServer | undefined
  let dir: string | undefined
  let prefixes = 0
  before(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'layoutd-etcd-'))
    server = await EtcdServer.start(dir)
  })
  after(async () => {
    // Unset when start-up failed; the failure is the before hook's.
    await server?.kill()
    if (dir !== undefined) await fs.rm(dir, { recursive: true, force: true })
  })
  const shared: SharedEtcd = {
    get server(): EtcdServer {
      if (server === undefined) throw new Error('the shared etcd did not start')
      return server
    },
    storeFor(t, endpoints = [shared.server.url], opts = {}) {
      const prefix = `/test/${process.pid}-${++prefixes}/`
      const store = new EtcdDeployStore(endpoints, { prefix, ...opts })
      t.after(() => store.close())
      return { store, prefix }
    },
  }
  return shared
}

/** A logger that keeps its lines. */
export function memLogger() {
  const lines: Array<{ level: string; msg: string; fields: Record<string, unknown> }> = []
  const at = (level: string) => (fields: Record<string, unknown>, msg: string) =>
    void lines.push({ level, msg, fields })
  const logger: Logger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }
  return { logger, lines }
}

/** Counts onChange calls and lets a test wait for the next one, bounded. */
export function changes() {
  let count = 0
  let waiters: Array<() => void> = []
  const onChange = () => {
    count++
    for (const w of waiters) w()
    waiters = []
  }
  const next = (what: string, ms = 5000) => {
    const seen = count
    return new Promise<void>((resolve, reject) => {
      if (count > seen) return resolve()
      const timer = setTimeout(() => reject(new Error(`${what}: no change within ${ms} ms`)), ms)
      waiters.push(() => {
        clearTimeout(timer)
        resolve()
      })
    })
  }
  return {
    onChange,
    next,
    get count() {
      return count
    },
  }
}

/** Watches store until the test ends; resolves, with the change feed, once the watch is established. */
export async function watching(t: TestContext, store: EtcdDeployStore): Promise<ReturnType<typeof changes>> {
  const ac = new AbortController()
  t.after(() => ac.abort())
  const c = changes()
  const established = c.next('established')
  store.watch(c.onChange, ac.signal)
  await established
  return c
}

/** A TCP server that accepts and never answers: an endpoint that is up but stuck. */
export async function blackhole(t: TestContext): Promise<{ url: string; requests: () => number }> {
  let n = 0
  const sockets = new Set<net.Socket>()
  const srv = net.createServer((s) => {
    sockets.add(s)
    // A request is what arrives; undici may open a connection it never uses.
    s.once('data', () => n++)
    s.on('error', () => sockets.delete(s))
  })
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve))
  t.after(() => {
    for (const s of sockets) s.destroy()
    return new Promise<void>((resolve) => srv.close(() => resolve()))
  })
  const addr = srv.address() as net.AddressInfo
  return { url: `http://127.0.0.1:${addr.port}`, requests: () => n }
}
