// `GET /gate/:host` and `GET /gate` (design §6.4): the gate as a proxy's
// forward auth reads it: the answer in the status and headers, and nothing
// an end client may see names a path. HEAD answers as GET, without a body.
import type { FastifyPluginCallbackTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply } from 'fastify'
import type { AgentApi, GateAnswer } from '../agent-api.js'
import { gateStatus, type GateState } from '../domain/gate-state.js'
import { canonicalHost, hostError } from '../domain/hostname.js'
import { type ReasonCode, ReasonCodeOrNone } from '../domain/reason-codes.js'
import { Type } from '../domain/typebox.js'
import { commonErrors, parserErrors } from './error-envelope.js'
import type { TypeboxApp } from './wakes.js'

export interface GateRoutesOptions {
  api: AgentApi
}

/** State and code always; the paths only with a `2xx`, for the proxy. */
export const GATE_HEADERS = {
  state: 'layoutd-state',
  code: 'layoutd-code',
  layout: 'layoutd-layout',
  socket: 'layoutd-socket',
  dir: 'layoutd-dir',
} as const

const GateQuery = Type.Object({
  auth_request: Type.Optional(
    Type.String({
      description:
        "Present (any value): nginx's statuses, the only ones its auth_request passes on: " +
        'not yet is `401`, never is `403` (an unknown host too); the state header tells them apart.',
    }),
  ),
})

const GateBody = Type.Object(
  {
    host: Type.String({ description: 'The host, as judged (lower case, no trailing dot).' }),
    state: Type.String({
      description:
        '`ready`; not yet: `starting`, `stopping`, `fenced`, `gate_shut`; ' +
        'never: `held`, `conflict`, `unmanaged`, `unknown`.',
    }),
    code: ReasonCodeOrNone,
  },
  {
    additionalProperties: false,
    description:
      "The gate's answer, for a person reading it through a proxy: it names no path (the paths of a grant are " +
      'in the `Layoutd-Socket` and `Layoutd-Dir` headers of a `204`, for the proxy alone).',
  },
)

function gateResponse(description: string) {
  return { ...GateBody, description }
}

const HEADER_HOST = /^(.*?)(?::[0-9]{1,5})?$/

/** The path's host, else X-Forwarded-Host's (Caddy, Traefik), else Host's; no port. */
function askedHost(param: string | undefined, headers: Record<string, string | string[] | undefined>): string {
  if (param !== undefined) return canonicalHost(param)
  const raw = headers['x-forwarded-host'] ?? headers.host ?? ''
  const first = (Array.isArray(raw) ? (raw[0] ?? '') : raw).split(',', 1)[0]?.trim() ?? ''
  return canonicalHost(HEADER_HOST.exec(first)?.[1] ?? first)
}

interface Verdict {
  state: GateState
  code: ReasonCode | ''
  g: GateAnswer | null
}

/** A name that is no hostname is never layoutd's (design §6.4). */
const NO_HOSTNAME: Verdict = { state: 'unknown', code: 'invalid_host', g: null }

async function answer(api: AgentApi, host: string): Promise<Verdict> {
  // Said as the gate says it, not a 400 nginx would turn into a 500.
  if (hostError(host) !== null) return NO_HOSTNAME
  const g = await api.gate(host)
  return { state: g.state, code: g.answer.granted ? '' : g.answer.refusal.code, g }
}

async function send(reply: FastifyReply, api: AgentApi, host: string, authRequest: boolean): Promise<void> {
  sendVerdict(reply, host, await answer(api, host), authRequest)
}

function sendVerdict(reply: FastifyReply, host: string, { state, code, g }: Verdict, authRequest: boolean): void {
  void reply.code(gateStatus(state, authRequest)).header('cache-control', 'no-store').header(GATE_HEADERS.state, state)
  if (code !== '') void reply.header(GATE_HEADERS.code, code)
  if (g?.retryAfter !== null && g?.retryAfter !== undefined) void reply.header('retry-after', String(g.retryAfter))
  if (g?.answer.granted === true) {
    // The proxy consumes these; its client gets the upstream's answer.
    const grant = g.answer.grant
    void reply
      .header(GATE_HEADERS.layout, grant.layout)
      .header(GATE_HEADERS.socket, grant.socket)
      .header(GATE_HEADERS.dir, grant.dir)
  }
  // A grant has no body, so a proxy that reads none keeps the connection.
  if (g?.answer.granted === true) void reply.send()
  else void reply.send({ host, state, code })
}

const GATE_PATH = /^\/gate\/([^/?]*)(?:\?(.*))?$/

/** How much of a refused name an answer's body shows. */
const SHOWN_NAME = 64

/** A `GET|HEAD /gate/…` the router refused gets `unknown`, never a 414 or 400. */
export function answerUnroutable(method: string, url: string, reply: FastifyReply): boolean {
  const m = method === 'GET' || method === 'HEAD' ? GATE_PATH.exec(url) : null
  if (m === null) return false
  const name = m[1] ?? ''
  const shown = name.length > SHOWN_NAME ? `${name.slice(0, SHOWN_NAME)}…` : name
  sendVerdict(reply, shown, NO_HOSTNAME, new URLSearchParams(m[2] ?? '').has('auth_request'))
  return true
}

const DESCRIPTION =
  '`204` when the host may wake now, with `Layoutd-Socket`, `Layoutd-Dir` and `Layoutd-Layout` for the proxy ' +
  'to route by; not yet (starting, stopping, fenced for its move, the isolation gate shut) `503` with ' +
  '`Retry-After`; never `403` (held, in conflict, not the activator’s) or `404` (unknown). ' +
  'Every answer carries `Layoutd-State` and, refused, `Layoutd-Code`. With `auth_request`, nginx’s statuses: ' +
  'not yet `401`, never `403`. The host is taken in lower case, one trailing dot dropped. Claims nothing.'

function responses() {
  return {
    204: Type.Null({ description: 'The host may wake now; the paths are in the headers, and there is no body.' }),
    401: gateResponse('With `auth_request`: not yet; `Retry-After` says when to ask again.'),
    403: gateResponse('Never, until a person acts or the row changes (held, conflict, unmanaged).'),
    404: gateResponse(
      'No such host in the registry, or not a hostname (`invalid_host`): one too long to route, ' +
        'or not percent-decodable, included.',
    ),
    503: gateResponse('Not yet; `Retry-After` says when to ask again.'),
    ...parserErrors,
    400: commonErrors[400],
    500: commonErrors[500],
  }
}

export const gateRoutes: FastifyPluginCallbackTypebox<GateRoutesOptions> = (app: TypeboxApp, { api }, done) => {
  app.get(
    '/gate/:host',
    {
      schema: {
        operationId: 'gateHost',
        summary: 'Forward auth: may this host wake now',
        description: DESCRIPTION,
        tags: ['activator'],
        security: [],
        params: Type.Object({
          host: Type.String({ description: 'The hostname, in any case, a trailing dot or not.' }),
        }),
        querystring: GateQuery,
        response: responses(),
      },
    },
    async (request, reply) => {
      await send(reply, api, askedHost(request.params.host, request.headers), request.query.auth_request !== undefined)
      return reply
    },
  )
  app.get(
    '/gate',
    {
      schema: {
        operationId: 'gateForwardedHost',
        summary: 'Forward auth: may the forwarded host wake now',
        description: `The host is \`X-Forwarded-Host\`'s (Caddy and Traefik send it), else \`Host\`'s. ${DESCRIPTION}`,
        tags: ['activator'],
        security: [],
        querystring: GateQuery,
        response: responses(),
      },
    },
    async (request, reply) => {
      await send(reply, api, askedHost(undefined, request.headers), request.query.auth_request !== undefined)
      return reply
    },
  )
  done()
}
