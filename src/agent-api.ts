// What the HTTP routes ask of the agent. It is all they know of it, so a test
// can build the app around a real Agent on a temp data dir.
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

/** GET /ready's body. */
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

/** Granted with the paths, or refused with the reason. */
export type WakeAnswer = { granted: true; grant: WakeGrant } | { granted: false; refusal: WakeRefusal }

/** A wake's answer as the gate says it to a proxy (design §6.4). */
export interface GateAnswer {
  answer: WakeAnswer
  state: GateState
  /** Seconds; null for ready and never. */
  retryAfter: number | null
}

/** Far above any box's instances; bounds one request's work. */
export const MAX_AWAKE_SET = 20_000

/** Past 253 bytes (design §2), so a near miss is `invalid_host` with its length. */
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
  /** Cached, built again only when an input changed (design §6.2). */
  report(): LayoutReport
  /** Read without building; a restart never matches an older tag. */
  reportTag(): string
  /** Built in slices of the loop (design §6.2), so a poll never holds the activator. */
  reportSoon(): Promise<{ report: LayoutReport; tag: string }>
  /** The leg's state right after the kick. */
  kick(): LegState
  /** Waits at most timeoutMs for the run the kick asked for; null on timeout. */
  converge(timeoutMs: number): Promise<LegRun | null>
  /** Once finished (null if the leg stops first); null when none is under way. */
  runUnderWay(): Promise<LegRun | null> | null
  legState(): LegState
  /** Who recorded the last-read intent and why. */
  intentRecord?(): IntentRecord | null
  /** Throws `intent_unreadable` while the intent is unreadable. */
  mint(): Promise<Mode>
  /** Where host's files sit, else mint()'s (design §5.5). */
  mintFor(host: string): Promise<HostMint>
  /** Recorded in the tick of the fence check (design §6.1). */
  claimWake(host: string): Promise<WakeAnswer>
  /** What a claim would get now, recording nothing. */
  readyFor(host: string): Promise<WakeAnswer>
  /** readyFor, as the gate says it. */
  gate(host: string): Promise<GateAnswer>
  /** A claim's answer, as the gate says it. */
  gateOf(answer: WakeAnswer): GateAnswer
  /** Once ready or never, or at ms or abort. */
  waitGate(host: string, ms: number, signal: AbortSignal): Promise<GateAnswer>
  /** For a `503` of `GET /ready`. */
  readyRetryAfter(): number
  /** A no-op for a host with no claim. */
  releaseWake(host: string): void
  /** The activator's whole set; `conflict` with no activator armed. */
  replaceWakes(awake: readonly string[]): WakeSet
  wakes(): WakeList
}
