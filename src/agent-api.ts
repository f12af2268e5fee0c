// What the HTTP routes ask of the agent. The routes know nothing else of
// it, so a test can build the app around a real Agent on a temp data dir.
import { Type } from './domain/typebox.js'
import type { Static } from 'typebox'
import type { GateState } from './domain/gate-state.js'
import type { HostMint } from './domain/mint.js'
import type { Mode } from './domain/modes.js'
import type { IntentRecord, LayoutReport, LegRun, LegState } from './domain/schemas.js'
import { ReasonCode } from './domain/reason-codes.js'

const ReadyCheck = Type.Object(
  {
    name: Type.String({ description: 'What was checked.' }),
    ok: Type.Boolean({ description: 'Whether it passed.' }),
    detail: Type.String({ description: 'What it found, or why it failed.' }),
    code: Type.Optional(
      Type.String({
        description:
          'Why a failed check failed, as a stable code (docs/runbook.md): for the registry ' +
          '`registry_removed`, `registry_replaced`, `registry_corrupt` or `registry_full`. Absent when it passed.',
      }),
    ),
  },
  { title: 'ReadyCheck', additionalProperties: false, description: 'One readiness check.' },
)
export type ReadyCheck = Static<typeof ReadyCheck>

/** GET /ready's body: the one shape the agent answers and the route serves. */
export const ReadyBody = Type.Object(
  {
    ready: Type.Boolean({ description: 'Start-up recovery is done and the activator may wake instances.' }),
    phase: Type.Union(
      [Type.Literal('starting'), Type.Literal('recovering'), Type.Literal('ready'), Type.Literal('stopping')],
      {
        description: 'Where the agent is in its life: starting, recovering, ready or stopping.',
      },
    ),
    checks: Type.Array(ReadyCheck, { description: 'Every readiness check, in order.' }),
    nested: Type.Object(
      {
        allowed: Type.Boolean({ description: 'The isolation gate lets nested instances wake.' }),
        reason: Type.String({ description: 'Why nested instances may not wake; empty when they may.' }),
      },
      { additionalProperties: false, description: 'The isolation gate, as a wake would see it.' },
    ),
    isolation: Type.Optional(
      Type.Array(
        Type.Object(
          {
            name: Type.String({ description: '`selfcheck`, `mounts` or `probe`.' }),
            ok: Type.Boolean({ description: 'Whether it passed.' }),
            code: Type.String({
              description:
                'Stable, for alerts and scripts: `ok`, an errno code (`EROFS`, `ENOSPC`, `EACCES`) or a named reason ' +
                '(`not-a-directory`, `no-nosymfollow`, `probe-not-ready`, `not-yet-run`).',
            }),
            detail: Type.String({ description: 'What it found; `not yet run` before its first evaluation.' }),
          },
          { title: 'IsolationCheck', additionalProperties: false, description: 'One check of the isolation gate.' },
        ),
        {
          description:
            "The isolation gate's checks, in order; the first that failed is the gate's reason. " +
            'They decide whether nested instances wake, never whether the agent is ready. ' +
            'Absent where no activator is armed.',
        },
      ),
    ),
  },
  {
    title: 'Readiness',
    additionalProperties: false,
    description: 'The phase, the readiness checks and the isolation gate.',
  },
)
export type Readiness = Static<typeof ReadyBody>
export type Phase = Readiness['phase']

// ---- wake claims (design §6) ----------------------------------------------

const host = Type.String({ description: 'The hostname the claim is about.' })

/** What the answer's `layout` can be: a row word of design §1, `unknown` or `unmanaged`. */
const layout = Type.String({
  description:
    'The row word: `fenced`, `conflict`, `foreign`, `nested`, `flat` or `external`; ' +
    '`unknown` when there is no such row or the agent is not ready to say, ' +
    '`unmanaged` when the activator does not manage the row here.',
})

export const WakeGrant = Type.Object(
  {
    host,
    layout,
    dir: Type.String({
      description: "The instance's directory, where its files are now; they do not move while the claim stands.",
    }),
    socket: Type.String({ description: 'The unix socket the instance must listen on.' }),
    db: Type.String({ description: "The instance's database file, inside `dir`; empty when none." }),
  },
  { title: 'WakeGrant', additionalProperties: false, description: 'The host may wake, at these paths.' },
)
export type WakeGrant = Static<typeof WakeGrant>

export const WakeRefusal = Type.Object(
  {
    host,
    layout,
    code: ReasonCode,
    reason: Type.String({
      description:
        'Why it may not wake, starting with what stands in the way: ' +
        '`fenced:`, `held down`, `conflict:`, `not ready:`, `unknown host:`, ' +
        '`not activator-managed:`, `isolation not ready:` (a nested host while the isolation gate is shut). ' +
        'For a person: decide by `code`, never by this sentence.',
    }),
  },
  { title: 'WakeRefusal', additionalProperties: false, description: 'The host may not wake now, and why.' },
)
export type WakeRefusal = Static<typeof WakeRefusal>

/** A claim's answer: granted with the paths, or refused with the reason. */
export type WakeAnswer = { granted: true; grant: WakeGrant } | { granted: false; refusal: WakeRefusal }

/** A wake's answer as the gate says it to a proxy (design §6.4): the answer, its state, and Retry-After. */
export interface GateAnswer {
  answer: WakeAnswer
  state: GateState
  /** Seconds a not-yet answer tells its client to wait (design §6.4); null for ready and never. */
  retryAfter: number | null
}

/** The most hosts one awake set may name: far above any box's instances; bounds one request's work. */
export const MAX_AWAKE_SET = 20_000

/** The longest hostname text taken: past 253 bytes (design §2), so a near miss is `invalid_host`, with its length. */
export const MAX_HOST_TEXT = 512

export const WakeSetBody = Type.Object(
  {
    awake: Type.Array(Type.String({ maxLength: MAX_HOST_TEXT, description: 'A hostname the activator has awake.' }), {
      maxItems: MAX_AWAKE_SET,
      description: 'Every host the activator has awake now: the whole set; every claim not named here ends.',
    }),
  },
  { additionalProperties: false, description: "The activator's awake set, sent at its own start." },
)

export const WakeSet = Type.Object(
  {
    awake: Type.Array(Type.String({ description: 'A claimed hostname.' }), {
      description: 'Every host now claimed, sorted.',
    }),
    stop: Type.Array(
      Type.Object(
        {
          host: Type.String({ description: 'A host the activator has awake that may not be.' }),
          code: ReasonCode,
          reason: Type.String({ description: 'Why it may not be awake, as a claim for it would be refused now.' }),
        },
        { additionalProperties: false, description: 'A host to stop.' },
      ),
      {
        description:
          'The hosts of the set the activator must stop: a claim for them would be refused now. ' +
          'They stay claimed until it releases them, so nothing moves their files while they run.',
      },
    ),
  },
  {
    title: 'WakeSet',
    additionalProperties: false,
    description: 'The claim set as recorded, and what must be stopped.',
  },
)
export type WakeSet = Static<typeof WakeSet>

export const WakeList = Type.Object(
  {
    awake: Type.Array(Type.String({ description: 'A claimed hostname.' }), {
      description: 'Every host holding a wake claim, sorted.',
    }),
    swept: Type.Boolean({
      description:
        'The claims persisted in the registry were read at start (or the activator has since sent its whole set). ' +
        'When false, the pass counts every host as awake.',
    }),
  },
  { title: 'WakeList', additionalProperties: false, description: 'The wake claims.' },
)
export type WakeList = Static<typeof WakeList>

export interface AgentApi {
  readiness(): Readiness
  /** The report: a cached value, built again only when one of its inputs changed (design §6.2). */
  report(): LayoutReport
  /** The report's tag, `<epoch>.<version>`, read without building; a restart never matches an older tag. */
  reportTag(): string
  /** The report with its tag, built in slices of the loop (design §6.2) so a poll never holds the activator. */
  reportSoon(): Promise<{ report: LayoutReport; tag: string }>
  /** Kicks the leg and returns its state right after the kick. */
  kick(): LegState
  /** Kicks the leg and waits (at most timeoutMs) for the run that kick asked for to finish; null on timeout. */
  converge(timeoutMs: number): Promise<LegRun | null>
  /** The run under way now, once it has finished (null when the leg stops first); null when none is under way. */
  runUnderWay(): Promise<LegRun | null> | null
  legState(): LegState
  /** The record the last read of the intent found (who recorded it, why), or null; absent: not told. */
  intentRecord?(): IntentRecord | null
  /** The mode a new row is minted in; throws an `intent_unreadable` AppError while the intent is unreadable. */
  mint(): Promise<Mode>
  /** The mode a row for host is minted in: where its files sit, else mint()'s (design §5.5). */
  mintFor(host: string): Promise<HostMint>
  /** Claims a wake (`POST /wakes/:host`, design §6.1), recorded in the tick of the fence check. */
  claimWake(host: string): Promise<WakeAnswer>
  /** What a claim would get now (`GET /ready/:host`), recording nothing. Throws `invalid_host`. */
  readyFor(host: string): Promise<WakeAnswer>
  /** What a claim would get now, as the gate says it: its state and Retry-After. Throws `invalid_host`. */
  gate(host: string): Promise<GateAnswer>
  /** A claim's answer, as the gate says it (the state and Retry-After of a refusal). */
  gateOf(answer: WakeAnswer): GateAnswer
  /** `GET /ready/:host?wait=`: the gate's answer once ready or never, or when ms pass or signal aborts. */
  waitGate(host: string, ms: number, signal: AbortSignal): Promise<GateAnswer>
  /** Seconds a `503` of `GET /ready` tells its client to wait. */
  readyRetryAfter(): number
  /** The host is asleep (`DELETE /wakes/:host`); a no-op for a host with no claim. Throws `invalid_host`. */
  releaseWake(host: string): void
  /** The activator's whole awake set (`PUT /wakes`); `conflict` with no activator armed. */
  replaceWakes(awake: readonly string[]): WakeSet
  /** Every claim (`GET /wakes`). */
  wakes(): WakeList
}
