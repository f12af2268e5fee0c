// Hold markers, `<data>/layout/<host>.hold` (design §1): a host stopped for
// its move whose move was then refused for a reason its tenant could have
// caused. It stays fenced and down across restarts. And the aside notes.
import fs from 'node:fs/promises'
import path from 'node:path'
import { Type, Value } from '../../domain/typebox.js'
import type { Static } from 'typebox'
import { validHost } from '../../domain/hostname.js'
import type { Mode } from '../../domain/modes.js'
import type { Dirs } from '../../domain/paths.js'
import { isReasonCode, type ReasonCode } from '../../domain/reason-codes.js'
import { errorMessage } from '../../errors.js'
import { atomicWriteMany, isNotFound, readNoFollow, unlinkMany } from '../fsutil.js'
import { ensureLayoutDir, HOLD_SUFFIX, layoutDir } from './journal.js'

export const HoldMarker = Type.Object(
  {
    v: Type.Literal(1),
    host: Type.String({ description: 'The held host; equals the file name.' }),
    to: Type.Union([Type.Literal('flat'), Type.Literal('nested')], {
      description: 'The layout the refused move went toward.',
    }),
    // A string, not the enum: a newer agent's code is still a hold here (legacy_hold), not corrupt.
    code: Type.Optional(
      Type.String({ description: "The reason's code (reason-codes.ts); absent in markers of older agents." }),
    ),
    reason: Type.String({ description: 'Why the move was refused, in words an operator can act on.' }),
    heldAt: Type.String({ description: 'When the host was held (RFC 3339).' }),
  },
  { additionalProperties: false },
)
export type HoldMarker = Static<typeof HoldMarker>

/** A hold as the pass keeps it; a marker that does not read back stands under every intent until removed. */
export type Hold =
  | { host: string; to: Mode; code: ReasonCode; reason: string; corrupt: false }
  | { host: string; to: undefined; code: 'hold_corrupt'; reason: string; corrupt: true }

/** The marker's code, or legacy_hold for one this build does not know. */
export function markerCode(marker: Pick<HoldMarker, 'code'>): ReasonCode {
  return isReasonCode(marker.code) ? marker.code : 'legacy_hold'
}

export async function writeHolds(dirs: Dirs, holds: readonly HoldMarker[]): Promise<void> {
  if (holds.length === 0) return
  const dir = await ensureLayoutDir(dirs)
  await atomicWriteMany(
    dir,
    holds.map((h) => ({ name: `${h.host}${HOLD_SUFFIX}`, data: `${JSON.stringify(h)}\n` })),
  )
}

export async function removeHolds(dirs: Dirs, hosts: Iterable<string>): Promise<void> {
  await unlinkMany(
    layoutDir(dirs),
    [...hosts].map((h) => `${h}${HOLD_SUFFIX}`),
  )
}

export async function readHold(dirs: Dirs, host: string): Promise<Hold | undefined> {
  const file = path.join(layoutDir(dirs), `${host}${HOLD_SUFFIX}`)
  let text: string
  try {
    text = await readNoFollow(file)
  } catch (err) {
    if (isNotFound(err)) return undefined
    return {
      host,
      to: undefined,
      corrupt: true,
      code: 'hold_corrupt',
      reason: `hold marker ${file} cannot be read: ${errorMessage(err)}`,
    }
  }
  let raw: unknown
  try {
    raw = JSON.parse(text)
  } catch (err) {
    return {
      host,
      to: undefined,
      corrupt: true,
      code: 'hold_corrupt',
      reason: `hold marker ${file} is not JSON (${errorMessage(err)}); an operator decides`,
    }
  }
  if (!Value.Check(HoldMarker, raw) || raw.host !== host) {
    return {
      host,
      to: undefined,
      corrupt: true,
      code: 'hold_corrupt',
      reason: `hold marker ${file} is not a hold marker for ${host}; an operator decides`,
    }
  }
  return { host, to: raw.to, code: markerCode(raw), reason: raw.reason, corrupt: false }
}

export function asideHostDir(dirs: Dirs, host: string): string {
  return path.join(layoutDir(dirs), 'aside', host)
}

/** A UTC stamp that sorts by time and is a safe file name: 20261130T080102.123Z. */
export function asideStamp(ms: number): string {
  return new Date(ms).toISOString().replace(/[-:]/g, '')
}

function stampIso(stamp: string): string {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})(\.\d+)?Z/.exec(stamp)
  return m === null ? stamp : `${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}${m[7] ?? ''}Z`
}

/** The note a row carries after something was set aside for it. */
export function asideNote(dir: string, names: readonly string[], stamp: string): string {
  return `set aside at ${stampIso(stamp)}: ${[...names].sort().join(', ')} (in ${dir})`
}

async function readdirOrEmpty(dir: string): Promise<string[]> {
  try {
    return await fs.readdir(dir)
  } catch (err) {
    if (isNotFound(err)) return []
    throw err
  }
}

/** Every host's note from `aside/`: its newest stamp and what is in it. */
export async function loadAsideNotes(dirs: Dirs): Promise<Map<string, string>> {
  const notes = new Map<string, string>()
  for (const host of (await readdirOrEmpty(path.join(layoutDir(dirs), 'aside'))).filter(validHost)) {
    const stamps = (await readdirOrEmpty(asideHostDir(dirs, host))).sort()
    const newest = stamps[stamps.length - 1]
    if (newest === undefined) continue
    const dir = path.join(asideHostDir(dirs, host), newest)
    notes.set(host, asideNote(dir, await readdirOrEmpty(dir), newest))
  }
  return notes
}
