// Instance keys (design §4.5): after the
// activator may wake, every activator-managed tenant that has no key gets
// `instance.env` in its directory, holding `CARLOS_INSTANCE_KEY=<64 hex>`,
// mode 0600. A key is never overwritten: whatever is at that name already
// (a key, a file the tenant put there, a symlink) stays as it is.
//
// Each key is minted in its host's preparation slot, which a wake claim waits
// on, so no instance starts on a half-made key; no move runs during a
// backfill, so no key is written into a directory being renamed away.
import { errorMessage } from '../errors.js'
import { randomBytes } from 'node:crypto'
import { constants, type Stats } from 'node:fs'
import fs from 'node:fs/promises'
import path from 'node:path'
import type { Logger } from '../domain/ports.js'
import { fsyncDir, isNotFound, lstatOrUndefined, mapLimit } from './fsutil.js'

export const INSTANCE_ENV = 'instance.env'
export const INSTANCE_KEY_VAR = 'CARLOS_INSTANCE_KEY'

/**
 * The key is written under this name, then linked into place. Fixed, so the
 * next mint finds a crash's leftover without listing the directory: left,
 * it would be a second name of instance.env, which preflight holds.
 */
const TEMP = '.instance.env.tmp'

const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = constants

/** Tenants minted at once: each mint is a few syscalls and two fsyncs. */
const MINT_CONCURRENCY = 8

export type MintResult = { kind: 'minted' } | { kind: 'present' } | { kind: 'skipped'; reason: string }

/** The file's contents for a fresh key: 32 random bytes, as hex. */
export function instanceEnv(key = randomBytes(32).toString('hex')): string {
  return `${INSTANCE_KEY_VAR}=${key}\n`
}

/**
 * The directory at dir, reached from root one component at a time, each
 * lstat'd: a real directory, never a symlink (design §2.1). Answers its
 * stats, or why no key goes there.
 *
 * Node has no openat(2), so the key is then written by path: a component
 * swapped for a symlink between this walk and the open would still be
 * followed. Every parent on the way (D, D/apps, D/nested, D/nested/<host>)
 * is layoutd's or the operator's, not the tenant's, so only someone who
 * can already write there could win that race; the tenant owns only the
 * last directory, whose entries are opened with O_NOFOLLOW and O_EXCL and
 * named with link(2), which follows nothing.
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
 * Mints dir's instance key unless it has one; dir must lie under root (the
 * verified data root), reached through real directories only. The key is
 * written whole to a temporary file (created with O_EXCL | O_NOFOLLOW, mode
 * 0600, fsynced) and then given its name with link(2), which is as
 * exclusive as O_EXCL on the name itself (it fails with EEXIST on anything
 * there, a dangling symlink included, and never follows one) and makes the
 * file appear complete: a reader, or a crash, never meets a half-written
 * key, which "never overwritten" would otherwise keep for good.
 *
 * Run as root, the key is given to the directory's owner: an instance runs
 * as the owner of its directory, and a key it cannot read is no key.
 * Throws on an I/O error it does not expect.
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
    // Something appeared at the temporary name since it was removed: only
    // the tenant writes in its directory besides us.
    return { kind: 'skipped', reason: `${temp} could not be created: ${errorMessage(err)}` }
  }
  try {
    // The mode given to open() is masked by the umask; this one is not.
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

/**
 * One host's preparation slot: what runs in it for a host runs alone, in
 * the order it asked. The key backfill takes it for each host it mints
 * for; a wake claim waits until it is free.
 */
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

  /** Resolves when host's slot is free; undefined when it is free now, so a caller need not wait a tick. */
  busy(host: string): Promise<void> | undefined {
    return this.#tail.get(host)
  }
}

export interface BackfillDeps {
  /** The candidates: activator-managed hosts with a directory, as listed before the backfill. */
  hosts: readonly string[]
  /** The verified data root every key's directory is reached from. */
  root: string
  slots: HostSlots
  /**
   * Read in the host's slot (the row is read again there): the
   * directory to mint in now, or why this host gets no key this time.
   */
  target: (host: string) => { dir: string } | { skip: string }
  logger: Logger
  signal: AbortSignal
  /**
   * Whether a host that gets no key (skipped, or failed) for this reason
   * was told of already: a host tried again every run says its reason once.
   */
  toldAlready?: (host: string, reason: string) => boolean
  /** How each host ended: its key there (minted, present), or why not (skipped, failed). */
  settled?: (host: string, kind: keyof BackfillCounts, reason: string) => void
}

export interface BackfillCounts {
  minted: number
  present: number
  skipped: number
  failed: number
}

/** Mints the key of every host that has none; a host that fails is logged, and the next run tries it again. */
export async function backfillInstanceKeys(deps: BackfillDeps): Promise<BackfillCounts> {
  const counts: BackfillCounts = { minted: 0, present: 0, skipped: 0, failed: 0 }
  const tell = (host: string, reason: string): boolean => deps.toldAlready?.(host, reason) !== true
  await mapLimit(deps.hosts, MINT_CONCURRENCY, async (host) => {
    if (deps.signal.aborted) return
    await deps.slots.run(host, async () => {
      // Everything that can throw stays inside the try: one host's failure
      // must not settle the backfill while other hosts' keys are still being
      // written, or the leg would start moving directories under them.
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
