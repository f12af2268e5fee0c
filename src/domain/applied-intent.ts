// The rule that holds a read of the deploy store to the intent the box
// keeps (design §7.7): a store gone, emptied or replaced reads unreadable,
// never "no intent recorded".
import type { Static } from 'typebox'
import { selectIntent } from './intent.js'
import { validMode } from './modes.js'
import { IntentRecord } from './schemas.js'
import { Type } from './typebox.js'

export const AppliedIntent = Type.Object(
  {
    v: Type.Literal(1),
    id: IntentRecord.properties.id,
    mode: Type.Union([Type.Literal('flat'), Type.Literal('nested')], { description: 'The mode the record asks for.' }),
    box: Type.Optional(Type.String({ description: 'The box label the record addresses; absent for the fleet.' })),
    store: Type.String({
      description: 'Which store it was read from (`dir <path>`, `etcd cluster <id> <prefix>`); never a secret.',
    }),
    appliedAt: Type.String({ description: 'When this box first selected it (RFC 3339, UTC).' }),
  },
  { additionalProperties: false },
)
export type AppliedIntent = Static<typeof AppliedIntent>

export function appliedFrom(intent: IntentRecord, store: string, now: Date): AppliedIntent | undefined {
  if (!validMode(intent.mode)) return undefined
  return {
    v: 1,
    id: intent.id,
    mode: intent.mode,
    ...(intent.box === undefined ? {} : { box: intent.box }),
    store,
    appliedAt: now.toISOString(),
  }
}

/** null when the records hold kept, or a newer record for box. */
export function heldToApplied(
  records: readonly IntentRecord[],
  kept: AppliedIntent,
  box: string,
  store: string,
): string | null {
  if (records.some((r) => r.id === kept.id)) return null
  const read = selectIntent(records, box)
  if (read.found && read.intent.id > kept.id) return null
  const from = store === kept.store ? '' : ` (it was read from ${kept.store}; ${store} answers now)`
  const holds =
    records.length === 0
      ? 'the store holds no record: gone or emptied'
      : `the store holds ${records.length} record${records.length === 1 ? '' : 's'}, not that one and none ` +
        `newer addressing box ${box}: replaced, or restored from an older copy`
  return `this box last applied intent ${kept.id} (${kept.mode}, at ${kept.appliedAt})${from}; ${holds}`
}
