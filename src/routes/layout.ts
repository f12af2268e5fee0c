// The layout family (design §6): `GET /layout/status`, `POST /layout/converge`
// and `GET /layout/mint`, the mode a new row is minted in.
import type { FastifyPluginCallbackTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply } from 'fastify'
import { Type } from '../domain/typebox.js'
import type { AgentApi } from '../agent-api.js'
import { errors } from '../errors.js'
import { LegRun, LegState } from '../domain/schemas.js'
import { commonErrors, errorEnvelope, mutationErrors, parserErrors } from './error-envelope.js'
import { etagMatches, etagOf } from '../report/etag.js'
import { StatusBody, StatusJson } from '../report/report-json.js'
import { inTurns, legAndRunPieces } from '../report/run-json.js'

/** The longest a `converge?wait=1` holds its request, in seconds. */
export const MAX_WAIT_S = 600

export interface LayoutRoutesOptions {
  api: AgentApi
}

const ConvergeQuery = Type.Object({
  wait: Type.Optional(
    Type.Union([Type.Literal('1'), Type.Literal('true'), Type.Literal('0'), Type.Literal('false')], {
      description:
        '`1` or `true`: wait for the run this request asks for and answer with its results. ' +
        'Absent, `0` or `false`: answer at once.',
    }),
  ),
  // Text: the app coerces nothing (design §6), so the range is checked in the handler.
  timeout: Type.Optional(
    Type.String({
      pattern: '^[0-9]{1,4}$',
      description:
        `With \`wait\`: the most seconds to wait, ` +
        `a whole number from 1 to ${MAX_WAIT_S} (default and cap ${MAX_WAIT_S}). ` +
        `The run goes on when the wait ends.`,
    }),
  ),
})

export const StatusHeaders = Type.Object({
  'if-none-match': Type.Optional(
    Type.String({ description: 'An ETag of an earlier answer: `304` while the report is unchanged.' }),
  ),
})

const Mint = Type.Object(
  {
    mode: Type.Union([Type.Literal('nested'), Type.Literal('flat')], {
      description:
        'The layout a new row of this box is created in; with `host`, the shape its files already sit in, if any.',
    }),
    found: Type.Optional(
      Type.Union([Type.Literal('nested'), Type.Literal('flat'), Type.Literal('none')], {
        description:
          'With `host`: where its files were found, `flat` (`D/apps/<host>`), `nested` (`D/nested/<host>/data`) ' +
          "or `none` (then `mode` is the intent's, or the default's).",
      }),
    ),
  },
  { additionalProperties: false, description: 'The mode to mint a new row in.' },
)

const MintQuery = Type.Object({
  host: Type.Optional(
    Type.String({
      description:
        'The host the row is for: the answer is then where its files already sit, when they do. ' +
        'Without it, the mode for a host with no files yet.',
    }),
  ),
})

/** The app, typed by this family's schemas. */
type LayoutApp = Parameters<FastifyPluginCallbackTypebox<LayoutRoutesOptions>>[0]

export const layoutRoutes: FastifyPluginCallbackTypebox<LayoutRoutesOptions> = (app, { api }, done) => {
  statusRoute(app, api)
  convergeRoute(app, api)
  mintRoute(app, api)
  done()
}

/** The report as the bytes of its version; 304 while its ETag stands. */
function statusRoute(app: LayoutApp, api: AgentApi): void {
  const json = new StatusJson(() => api.reportSoon())
  let quoted: { tag: string; etag: string } | undefined
  const quote = (tag: string): string => {
    if (quoted?.tag !== tag) quoted = { tag, etag: etagOf(tag) }
    return quoted.etag
  }

  app.get(
    '/layout/status',
    {
      schema: {
        operationId: 'getLayoutStatus',
        summary: 'The status report',
        description:
          'Every instance-kind row with its layout and why, the intent the box works under, ' +
          'the leg and the warnings an operator should see. ' +
          'Answers with a strong `ETag`; a request whose `If-None-Match` carries it gets `304` with no body.',
        tags: ['layout'],
        security: [],
        headers: StatusHeaders,
        response: {
          200: StatusBody,
          304: Type.Null({ description: 'Not modified: the report is still the one with this ETag.' }),
          ...parserErrors,
          500: commonErrors[500],
        },
      },
    },
    async (request, typed) => {
      // Untyped: the 200 goes out as bytes already serialized.
      const reply: FastifyReply = typed
      // Reading the tag builds nothing: a 304 costs a comparison.
      const tag = api.reportTag()
      const etag = quote(tag)
      void reply.header('etag', etag).header('cache-control', 'no-cache')
      if (etagMatches(request.headers['if-none-match'], etag)) return reply.code(304).send()
      // Serialized once per version; a Buffer bypasses the serializer.
      return reply.type('application/json; charset=utf-8').send(await json.bytes(reply, tag))
    },
  )
}

function convergeRoute(app: LayoutApp, api: AgentApi): void {
  app.post(
    '/layout/converge',
    {
      schema: {
        operationId: 'convergeLayout',
        summary: 'Run the layout pass now',
        description:
          'Kicks the leg (a serial move) and answers `202` with its state right after the kick. ' +
          'With `wait=1` the answer waits, at most `timeout` seconds, ' +
          'for the run this kick asked for and carries its results; ' +
          '`504` when that run has not finished by then (it goes on; `GET /layout/status` shows it).',
        tags: ['layout'],
        security: [{ bearer: [] }],
        querystring: ConvergeQuery,
        response: {
          200: Type.Object(
            {
              leg: LegState,
              run: LegRun,
              underWay: Type.Optional(
                Type.Union([LegRun, Type.Null()], {
                  description:
                    'The run that was under way when the kick came, once it finished (null when the leg stopped ' +
                    'first); absent when none was. It is the run that moved the hosts `run` then found unchanged.',
                }),
              ),
            },
            {
              additionalProperties: false,
              description: 'The run finished: the leg now, the results of the run, and the run under way at the kick.',
            },
          ),
          202: Type.Object({ leg: LegState }, { additionalProperties: false, description: 'Kicked.' }),
          ...commonErrors,
          ...mutationErrors,
          504: errorEnvelope('`wait` was asked and the run did not finish within `timeout` seconds; it goes on.'),
        },
      },
    },
    async (request, reply) => {
      const { wait, timeout } = request.query
      const seconds = timeout === undefined ? MAX_WAIT_S : Number(timeout)
      if (seconds < 1 || seconds > MAX_WAIT_S)
        throw errors.badRequest(`querystring/timeout must be a whole number of seconds from 1 to ${MAX_WAIT_S}`)
      if (wait !== '1' && wait !== 'true') return reply.code(202).send({ leg: api.kick() })
      // The idle timeout would cut the silent wait short (an injected socket has no timers).
      const socket = request.raw.socket
      if (typeof socket.setTimeout === 'function') socket.setTimeout((seconds + 5) * 1000)
      // Before the kick: the run under way moves the hosts this kick's run then finds done.
      const underWay = api.runUnderWay()
      const run = await api.converge(seconds * 1000)
      if (run === null) {
        throw errors.convergeTimeout(seconds)
      }
      // It ended before the run waited for began.
      const joined = underWay === null ? undefined : await underWay
      // Written a slice per turn, so a wake waits for a slice, not the answer; untyped, as already serialized.
      const raw: FastifyReply = reply
      const pieces = await legAndRunPieces(raw, api.legState(), run, joined)
      return raw.code(200).type('application/json; charset=utf-8').send(inTurns(pieces))
    },
  )
}

function mintRoute(app: LayoutApp, api: AgentApi): void {
  app.get(
    '/layout/mint',
    {
      schema: {
        operationId: 'getMintMode',
        summary: 'The mode to create a new row in',
        description:
          'What the provisioner asks before it adds a row: ' +
          'the layout the intent (or the default) wants for this box. ' +
          'With `host`, the row for that host: where its files already sit (its flat or its nested dir), ' +
          'that shape, which the pass then moves as any other row; a row minted beside them would name an ' +
          'empty directory. `409` when something is at both dirs (`mint_both_shapes`), or at one but not a ' +
          'real directory (`mint_not_a_directory`): an operator settles it first. ' +
          '`503` while the intent is unreadable: the agent fails closed rather than guess a layout.',
        tags: ['layout'],
        security: [],
        querystring: MintQuery,
        response: {
          200: Mint,
          ...parserErrors,
          400: errorEnvelope('`host` is not a valid DNS name (`invalid_host`), or the request is malformed.'),
          409: errorEnvelope(
            "The host's files are found in both shapes (`mint_both_shapes`), or what is at one of its dirs " +
              'is not a real directory (`mint_not_a_directory`); the message names the paths.',
          ),
          500: commonErrors[500],
          503: errorEnvelope(
            'The layout intent is unreadable (`intent_unreadable`): no mode can be promised until it is read.',
          ),
        },
      },
    },
    async (request) => {
      const { host } = request.query
      return host === undefined ? { mode: await api.mint() } : await api.mintFor(host)
    },
  )
}
