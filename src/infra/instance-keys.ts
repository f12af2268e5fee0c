// Instance keys (design §4.5): once the activator may wake, each activator-managed tenant without one gets
// `instance.env` (`CARLOS_INSTANCE_KEY=<64 hex>`, 0600). Nothing at that name is ever replaced.
import { errorMessage } from '../errors.js'
import { randomBytes } from 'node:crypto'
import { constants, type Stats } from 'node:fs'
import fs from 'node:fs/promises'
import path from 'node:path'
import type { Logger } from '../domain/ports.js'
import { fsyncDir, isNotFound, lstatOrUndefined, mapLimit } from './fsutil.js'

export const INSTANCE_ENV = 'instance.env'
export const INSTANCE_KEY_VAR = 'CARLOS_INSTANCE_KEY'

/** Fixed, so the next mint finds a crash's leftover without a listing. */
const TEMP = '.instance.env.tmp'

const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = constants

const MINT_CONCURRENCY = 8

export type MintResult = { kind: 'minted' } | { kind: 'present' } | { kind: 'skipped'; reason: string }

export function instanceEnv(key = randomBytes(32).toString('hex')): string {
  return `${INSTANCE_KEY_VAR}=${key}\n`
}

/**
 * Through real directories only (design §2.1). Without openat(2) the key is then written by path, a race only a
 * writer of the parents, never the tenant, could win.
 */
async function walkFromRoot(root: string, dir: string): Promise<{ st: Stats } | { skip: string }> {
  const rel = path.relative(root, dir)
  if (rel === '' || rel.startsWith('..') || path.isAbsolute(rel))
    return { skip: `${dir} is not inside the data root ${root}` }
  let at = root
  let st: Stats | undefined
  for (const name of rel.split(path.sep)) {
    at = path.join(at, name)
    st = await lstatOrUndefined(at)
    if (st === undefined) return { skip: `${at} does not exist` }
    if (st.isSymbolicLink()) return { skip: `${at} is a symlink; a key is minted only through real directories` }
    if (!st.isDirectory()) return { skip: `${at} is not a directory` }
  }
  return st === undefined ? { skip: `${dir} is not inside the data root ${root}` } : { st }
}

/**
 * An O_EXCL|O_NOFOLLOW temp file, fsynced, then link(2)ed, which fails on anything there and follows nothing: no one
 * meets a half key. As root, given to the directory's owner, whom the instance runs as.
 */
export async function mintInstanceKey(dir: string, root: string): Promise<MintResult> {
  const walked = await walkFromRoot(root, dir)
  if ('skip' in walked) return { kind: 'skipped', reason: walked.skip }
  const { st } = walked
  const temp = path.join(dir, TEMP)
  const target = path.join(dir, INSTANCE_ENV)
  await unlinkIfThere(temp)
  if ((await lstatOrUndefined(target)) !== undefined) return { kind: 'present' }
  let fh
  try {
    fh = await fs.open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600)
  } catch (err) {
    // Only the tenant writes here besides us.
    return { kind: 'skipped', reason: `${temp} could not be created: ${errorMessage(err)}` }
  }
  try {
    // The umask masks open()'s mode.
    await fh.chmod(0o600)
    if (process.getuid?.() === 0) await fh.chown(st.uid, st.gid)
    await fh.writeFile(instanceEnv())
    await fh.sync()
  } finally {
    await fh.close()
  }
  let result: MintResult = { kind: 'minted' }
  try {
    await fs.link(temp, target)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') {
      await unlinkIfThere(temp)
      throw err
    }
    result = { kind: 'present' }
  }
  await unlinkIfThere(temp)
  await fsyncDir(dir)
  return result
}

async function unlinkIfThere(p: string): Promise<void> {
  try {
    await fs.unlink(p)
  } catch (err) {
    if (!isNotFound(err)) throw err
  }
}

/** What runs in a host's slot runs alone, in order: a wake claim waits on the backfill's mint. */
export class HostSlots {
  readonly #tail = new Map<string, Promise<void>>()

  async run<T>(host: string, fn: () => Promise<T>): Promise<T> {
    const before = this.#tail.get(host) ?? Promise.resolve()
    let free = (): void => {}
    const mine = new Promise<void>((resolve) => (free = resolve))
    const tail = before.then(() => mine)
    this.#tail.set(host, tail)
    try {
      await before
      return await fn()
    } finally {
      free()
      if (this.#tail.get(host) === tail) this.#tail.delete(host)
    }
  }

  /** undefined when free, so no tick is waited. */
  busy(host: string): Promise<void> | undefined {
    return this.#tail.get(host)
  }
}

export interface BackfillDeps {
  hosts: readonly string[]
  root: string
  slots: HostSlots
  /** Read in the host's slot. */
  target: (host: string) => { dir: string } | { skip: string }
  logger: Logger
  signal: AbortSignal
  /** A host retried every run says a reason once. */
  toldAlready?: (host: string, reason: string) => boolean
  settled?: (host: string, kind: keyof BackfillCounts, reason: string) => void
}

export interface BackfillCounts {
  minted: number
  present: number
  skipped: number
  failed: number
}

/** A failed host is logged and tried again next run. */
export async function backfillInstanceKeys(deps: BackfillDeps): Promise<BackfillCounts> {
  const counts: BackfillCounts = { minted: 0, present: 0, skipped: 0, failed: 0 }
  const tell = (host: string, reason: string): boolean => deps.toldAlready?.(host, reason) !== true
  await mapLimit(deps.hosts, MINT_CONCURRENCY, async (host) => {
    if (deps.signal.aborted) return
    await deps.slots.run(host, async () => {
      // Nothing may throw out: settling early would let the leg move directories under keys being written.
      let kind: keyof BackfillCounts
      let reason = ''
      try {
        const t = deps.target(host)
        if ('skip' in t) {
          kind = 'skipped'
          reason = t.skip
          if (tell(host, reason))
            deps.logger.info({ host, reason }, `agent: instance keys: ${host}: not minted: ${reason}`)
        } else {
          const r = await mintInstanceKey(t.dir, deps.root)
          kind = r.kind
          if (r.kind === 'skipped') {
            reason = r.reason
            if (tell(host, reason))
              deps.logger.warn({ host, reason }, `agent: instance keys: ${host}: not minted: ${reason}`)
          }
        }
      } catch (err) {
        kind = 'failed'
        reason = errorMessage(err)
        if (tell(host, reason))
          deps.logger.error({ host, err }, `agent: instance keys: ${host}: ${reason} (the next run tries again)`)
      }
      counts[kind]++
      deps.settled?.(host, kind, reason)
    })
  })
  return counts
}
