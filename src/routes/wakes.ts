// `POST`/`DELETE /wakes/:host`, `PUT /wakes` and `GET /wakes` (design §6.1):
// the activator's wake claims. The pass never moves a claimed host's files.
import type { FastifyPluginCallbackTypebox } from '@fastify/type-provider-typebox'
import { Type } from '../domain/typebox.js'
import { type AgentApi, MAX_HOST_TEXT, WakeGrant, WakeList, WakeRefusal, WakeSet, WakeSetBody } from '../agent-api.js'
import type { GateState } from '../domain/gate-state.js'
import { AppError } from '../errors.js'
import { commonErrors, errorEnvelope, mutationErrors, parserErrors } from './error-envelope.js'

export interface WakesRoutesOptions {
  api: AgentApi
}

export const HostParams = Type.Object({
  host: Type.String({ description: 'The hostname (a valid DNS name, lower case).' }),
})

/** The awake set names every instance: thousands of long hostnames must fit. */
const WAKE_SET_BODY_LIMIT = 1024 * 1024

const invalidHost = errorEnvelope(
  'The hostname is not a valid DNS name (`invalid_host`), or the request is otherwise malformed.',
)

/** Not judged yet: `503` with `Retry-After`, never `409` (design §6.4). */
const NOT_JUDGED: ReadonlySet<GateState> = new Set<GateState>(['starting', 'stopping'])

/** Seconds before a claim that met another process's write lock is asked again. */
const BUSY_RETRY_AFTER_S = 1

const registryUnavailable = errorEnvelope(
  'The registry cannot record or judge the claim now: write-locked by another process (`registry_busy`, ' +
    'with `Retry-After`), or its file removed, replaced, corrupt or on a full disk (`registry_removed`, ' +
    '`registry_replaced`, `registry_corrupt`, `registry_full`); nothing was recorded. ' +
    'Also `not_ready` while start-up recovery runs.',
)

/** Throws err, with Retry-After where the registry was only write-locked. */
function answerRegistryError(reply: { header(name: string, value: string): unknown }, err: unknown): never {
  if (err instanceof AppError && err.code === 'registry_busy') reply.header('retry-after', String(BUSY_RETRY_AFTER_S))
  throw err
}

export const hostTooLong = errorEnvelope(
  `The hostname parameter is longer than ${MAX_HOST_TEXT} bytes (\`uri_too_long\`); no hostname is.`,
)

/** The app a route plugin registers on, typed by TypeBox. */
export type TypeboxApp = Parameters<FastifyPluginCallbackTypebox>[0]

function claimWakeRoute(app: TypeboxApp, api: AgentApi): void {
  app.post(
    '/wakes/:host',
    {
      schema: {
        operationId: 'claimWake',
        summary: 'Claim a wake',
        description:
          'The activator asks before it starts an instance. ' +
          'Refused (`409`, with the reason and its code) while the host is fenced (its files are moving), ' +
          'held down, in conflict with another row, unknown, not activator-managed, ' +
          'its files not where the row says (`files_missing`, `files_elsewhere`, `files_not_directory`), ' +
          'or nested while the isolation gate is shut; not judged yet (`503`) while layoutd is not ready ' +
          "or a nested host waits for the isolation gate's first checks; " +
          'a refusal that passes on its own (not ready, fenced for its move, the gate shut) carries `Retry-After`. ' +
          'Otherwise the claim is recorded (it survives a restart of layoutd) ' +
          'and the answer carries the paths the instance must use: ' +
          'they do not change, and its files do not move, until the claim is released.',
        tags: ['activator'],
        security: [{ bearer: [] }],
        params: HostParams,
        response: {
          200: WakeGrant,
          409: WakeRefusal,
          ...commonErrors,
          400: invalidHost,
          414: hostTooLong,
          ...mutationErrors,
          503: Type.Union([WakeRefusal, registryUnavailable], {
            description:
              'Not judged yet: the agent is starting or stopping (`not_ready`), or the host is nested and the ' +
              "isolation gate's first checks have not run (`gate_pending`), with `Retry-After` and the refusal's " +
              'body; or the registry cannot record or judge the claim (the error envelope).',
          }),
        },
      },
    },
    async (request, reply) => {
      const answer = await api.claimWake(request.params.host).catch((err: unknown) => answerRegistryError(reply, err))
      if (answer.granted) return reply.code(200).send(answer.grant)
      // A refusal that passes on its own says when to ask again.
      const { retryAfter, state } = api.gateOf(answer)
      if (retryAfter !== null) void reply.header('retry-after', String(retryAfter))
      // Not judged yet is no refusal.
      return reply.code(NOT_JUDGED.has(state) ? 503 : 409).send(answer.refusal)
    },
  )
}

function releaseWakeRoute(app: TypeboxApp, api: AgentApi): void {
  app.delete(
    '/wakes/:host',
    {
      schema: {
        operationId: 'releaseWake',
        summary: 'Release a wake',
        description:
          'The instance is asleep: its claim ends, and a move waiting to stop it goes on. ' +
          '`204` whether or not the host held a claim, so a release can be repeated safely.',
        tags: ['activator'],
        security: [{ bearer: [] }],
        params: HostParams,
        response: {
          204: Type.Null({ description: 'Released (or there was nothing to release).' }),
          ...commonErrors,
          400: invalidHost,
          414: hostTooLong,
          ...mutationErrors,
          503: registryUnavailable,
        },
      },
    },
    async (request, reply) => {
      try {
        api.releaseWake(request.params.host)
      } catch (err) {
        answerRegistryError(reply, err)
      }
      return reply.code(204).send(null)
    },
  )
}

function replaceWakesRoute(app: TypeboxApp, api: AgentApi): void {
  app.put(
    '/wakes',
    {
      bodyLimit: WAKE_SET_BODY_LIMIT,
      schema: {
        operationId: 'replaceWakes',
        summary: "Replace the claim set with the activator's awake set",
        description:
          'Sent by the activator at its own start: ' +
          'the hosts it has awake become the whole claim set, every other claim ends. ' +
          'Every host named is recorded as claimed, as it is awake; ' +
          'the answer names those it must stop, because a claim for them would be refused now.',
        tags: ['activator'],
        security: [{ bearer: [] }],
        body: WakeSetBody,
        response: {
          200: WakeSet,
          ...commonErrors,
          400: errorEnvelope(
            'The body is malformed, or names a hostname that is not a valid DNS name (`invalid_host`).',
          ),
          ...mutationErrors,
          409: errorEnvelope('No activator is armed on this box (`CARLOS_ACTIVATOR=none`): wake claims are not taken.'),
          503: errorEnvelope(
            'Start-up recovery has not finished (`not_ready`); send the set again once `GET /ready` answers `200`. ' +
              '(`Retry-After` says when to ask.) Or the registry cannot record the set ' +
              '(`registry_busy` with `Retry-After`, or a registry fault: ' +
              '`registry_removed`, `registry_replaced`, `registry_corrupt`, `registry_full`).',
          ),
        },
      },
    },
    (request, reply) => {
      try {
        return api.replaceWakes(request.body.awake)
      } catch (err) {
        return answerRegistryError(reply, err)
      }
    },
  )
}

function listWakesRoute(app: TypeboxApp, api: AgentApi): void {
  app.get(
    '/wakes',
    {
      schema: {
        operationId: 'listWakes',
        summary: 'The wake claims',
        description:
          'Every host holding a wake claim, and whether the claims persisted in the registry could be read at start.',
        tags: ['activator'],
        security: [],
        response: {
          200: WakeList,
          ...parserErrors,
          500: commonErrors[500],
        },
      },
    },
    (_request, reply) => {
      void reply.header('cache-control', 'no-store')
      return api.wakes()
    },
  )
}

export const wakesRoutes: FastifyPluginCallbackTypebox<WakesRoutesOptions> = (app, { api }, done) => {
  claimWakeRoute(app, api)
  releaseWakeRoute(app, api)
  replaceWakesRoute(app, api)
  listWakesRoute(app, api)
  done()
}
