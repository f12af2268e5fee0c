// The shapes the domain shares with the registry, the deploy stores, the CLI
// and the HTTP API, each a TypeBox schema its type derives from.
import { Type } from './typebox.js'
import type { Static } from 'typebox'
import { ReasonCodeOrNone } from './reason-codes.js'

export const RouteKind = Type.Union(
  [Type.Literal('instance'), Type.Literal('sidecar'), Type.Literal('static'), Type.Literal('service')],
  { description: 'What the row serves. Only `instance` rows are ever classified or moved.' },
)
export type RouteKind = Static<typeof RouteKind>

export const ROUTE_KINDS: readonly RouteKind[] = ['instance', 'sidecar', 'static', 'service']

/** A registry row (design §2). */
export const Route = Type.Object(
  {
    host: Type.String({ description: 'The hostname the row serves; a valid DNS name.' }),
    kind: RouteKind,
    socket: Type.String({ description: 'The unix socket the instance listens on; empty when none.' }),
    dir: Type.String({ description: "The instance's directory; empty when none." }),
    db: Type.String({ description: "The instance's database file, inside `dir`; empty when none." }),
    hibernate: Type.Boolean({ description: 'Whether the activator wakes and sleeps the instance.' }),
  },
  { additionalProperties: false },
)
export type Route = Static<typeof Route>

export const RowPaths = Type.Object(
  {
    dir: Type.String({ description: 'Instance directory.' }),
    socket: Type.String({ description: 'Unix socket path.' }),
    db: Type.String({ description: 'Database file path; empty when none.' }),
  },
  { additionalProperties: false },
)
export type RowPaths = Static<typeof RowPaths>

/** Design §1, §7. Any mode is a record; an unknown one makes the intent unreadable only if it addresses this box. */
export const IntentRecord = Type.Object(
  {
    id: Type.String({
      minLength: 1,
      maxLength: 128,
      pattern: '^[A-Za-z0-9._-]+$',
      description: 'Sorts by time; newest last.',
    }),
    mode: Type.String({ description: '`flat` or `nested`; any other value makes the intent unreadable.' }),
    force: Type.Boolean({ description: 'Skip the awake grace: stop awake instances at once.' }),
    box: Type.Optional(Type.String({ description: 'The box label the intent addresses; absent for the whole fleet.' })),
    recordedAt: Type.String({ description: 'When the intent was recorded (RFC 3339, UTC).' }),
    by: Type.String({ description: 'Who recorded it: `user@host` of the CLI that did.' }),
    message: Type.Optional(
      Type.String({
        maxLength: 1000,
        description:
          'Why, in the words of whoever recorded it (`-m`); absent when none was given, and in records of ' +
          'builds before it.',
      }),
    ),
  },
  { additionalProperties: false },
)
export type IntentRecord = Static<typeof IntentRecord>

const Outcome = Type.Union(
  [
    Type.Literal('unchanged'),
    Type.Literal('moved'),
    Type.Literal('deferred'),
    Type.Literal('held'),
    Type.Literal('refused'),
    Type.Literal('failed'),
    Type.Literal('recovered'),
    Type.Literal('released'),
  ],
  { description: "One host's outcome of a pass run." },
)

export const ResultSchema = Type.Object(
  {
    host: Type.String({ description: 'The host; empty for a result about the whole run.' }),
    outcome: Outcome,
    code: ReasonCodeOrNone,
    reason: Type.String({ description: 'Why, when the outcome withheld or failed something.' }),
    to: Type.Optional(
      Type.Union([Type.Literal('flat'), Type.Literal('nested')], { description: 'The mode the move went toward.' }),
    ),
  },
  { title: 'Result', additionalProperties: false, description: "One host's result of a run of the pass." },
)
export type Result = Static<typeof ResultSchema>

export const LegRun = Type.Object(
  {
    startedAt: Type.String({ description: 'When the run started (RFC 3339).' }),
    finishedAt: Type.Union([Type.String(), Type.Null()], { description: 'When it finished; null while it runs.' }),
    results: Type.Array(ResultSchema, { description: 'Every host the run reached, in order.' }),
  },
  { title: 'LegRun', additionalProperties: false, description: 'One run of the pass.' },
)
export type LegRun = Static<typeof LegRun>

export const LegState = Type.Object(
  {
    running: Type.Boolean({ description: 'A run of the pass is under way.' }),
    pending: Type.Boolean({ description: 'Another run is due after the current one.' }),
    lastRun: Type.Union([LegRun, Type.Null()], {
      description: 'The last run that finished, or the one under way; null before any.',
    }),
    retryAt: Type.Union([Type.String(), Type.Null()], {
      description: 'When the retry timer kicks the leg again; null when none is pending.',
    }),
    waiting: Type.Optional(
      Type.String({
        description:
          'What the run under way waits on, in words (`the activator to stop t01 (awake, force)`); ' +
          'absent when it waits on nothing.',
      }),
    ),
  },
  {
    title: 'LegState',
    additionalProperties: false,
    description: 'The leg: whether a run is under way or due, and the last run.',
  },
)
export type LegState = Static<typeof LegState>

/** Any string: the serializer drops keys that miss the default `^.*$`, so a host with a newline would vanish. */
const ANY_KEY = Type.String({ pattern: '^[\\s\\S]*$' })

export const RowReport = Type.Object(
  {
    layout: Type.String({ description: 'fenced, conflict, foreign, nested, flat or external.' }),
    code: ReasonCodeOrNone,
    reason: Type.String({ description: 'Why the row is where it is, or why it did not move.' }),
    note: Type.String({ description: 'What the pass set aside for this host, and when.' }),
  },
  { title: 'RowReport', additionalProperties: false, description: 'One row of the report: its word, and why.' },
)
export type RowReport = Static<typeof RowReport>

/** design §6.2 */
export const LayoutReport = Type.Object(
  {
    box: Type.String({ description: "The box's label." }),
    mode: Type.Union(
      [
        Type.Literal('flat'),
        Type.Literal('nested'),
        Type.Literal('none'),
        Type.Literal('unreadable'),
        Type.Literal('unmanaged'),
      ],
      { description: 'The intent this box last converged to: flat, nested, none, unreadable or unmanaged.' },
    ),
    default: Type.Boolean({ description: 'The box is nested by default rather than by a recorded intent.' }),
    defaultBlocked: Type.String({
      description: 'Why the nested default does not apply on this box; empty when it does or is not asked.',
    }),
    rows: Type.Record(ANY_KEY, RowReport, { description: 'Every instance-kind row, by host.' }),
    leg: LegState,
    warnings: Type.Array(Type.String(), { description: 'What an operator should know about the box as a whole.' }),
  },
  { additionalProperties: false },
)
export type LayoutReport = Static<typeof LayoutReport>
