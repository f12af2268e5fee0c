// What one line of etcd's watch stream says (design §7.2): created, events,
// progress, a compaction, or why etcd ended the watch.
import { Value } from '../../domain/typebox.js'
import { errorMessage } from '../../errors.js'
import { schemaErrors } from '../schema-errors.js'
import { WatchLine } from './wire-schemas.js'

export interface WatchEvent {
  key: string
  type: 'PUT' | 'DELETE'
  revision: bigint
}

export interface WatchLineSays {
  created: boolean
  events: WatchEvent[]
  /** The header's revision (all a progress notification carries). */
  revision?: bigint
  /** The watch starts over from now. */
  compacted?: boolean
  why?: string
}

export function watchLineSays(line: string): WatchLineSays {
  let parsed: unknown
  try {
    parsed = JSON.parse(line)
  } catch (err) {
    return { created: false, events: [], why: `a watch message that is not JSON: ${errorMessage(err)}` }
  }
  if (!Value.Check(WatchLine, parsed))
    return { created: false, events: [], why: `a watch message that is not etcd's: ${schemaErrors(WatchLine, parsed)}` }
  if (parsed.error !== undefined)
    return { created: false, events: [], why: `etcd: ${parsed.error.message ?? 'an error without a message'}` }
  const result = parsed.result
  if (result === undefined) return { created: false, events: [] }
  const events: WatchEvent[] = (result.events ?? []).map((e) => ({
    key: Buffer.from(e.kv?.key ?? '', 'base64').toString('utf8'),
    type: e.type === 'DELETE' ? 'DELETE' : 'PUT',
    revision: revisionOf(e.kv?.mod_revision) ?? 0n,
  }))
  const revision = revisionOf(result.header?.revision)
  if (result.canceled === true) {
    const compacted = result.compact_revision !== undefined && result.compact_revision !== '0'
    const why = compacted
      ? `etcd compacted its history past the revision asked for (compacted at ${result.compact_revision}); ` +
        `watching again from now`
      : `etcd canceled the watch${result.cancel_reason ? `: ${result.cancel_reason}` : ''}`
    return { created: result.created === true, events, revision, compacted, why }
  }
  return { created: result.created === true, events, revision }
}

/** An int64 as the gateway writes it (decimal string); undefined if not. */
function revisionOf(text: string | undefined): bigint | undefined {
  return text !== undefined && /^[0-9]{1,19}$/.test(text) ? BigInt(text) : undefined
}
