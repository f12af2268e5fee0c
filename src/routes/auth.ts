// Who may mutate (design §6): the bearer of the token alone, from loopback
// too, since every uid shares loopback.
import { createHash, timingSafeEqual } from 'node:crypto'
import { isIPv4 } from 'node:net'
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { type AppError, errors } from '../errors.js'

const MUTATING = new Set(['POST', 'PUT', 'DELETE', 'PATCH'])

// Hashed first: equal lengths for timingSafeEqual, so not even the length leaks.
function sameToken(given: string, token: string): boolean {
  const a = createHash('sha256').update(given).digest()
  const b = createHash('sha256').update(token).digest()
  return timingSafeEqual(a, b)
}

function bearerOf(request: FastifyRequest): string | undefined {
  return /^Bearer[ ]+(\S+)[ ]*$/i.exec(request.headers.authorization ?? '')?.[1]
}

export function isLoopback(address: string | undefined): boolean {
  if (address === undefined) return false
  const a = address.toLowerCase()
  if (a === '::1') return true
  const v4 = a.startsWith('::ffff:') ? a.slice('::ffff:'.length) : a
  return isIPv4(v4) && v4.startsWith('127.')
}

/** Before the body is read; the peer is the socket's, no proxy trusted. */
export function authHook(token: string) {
  return function requireAuth(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    done(refusal(request, reply, token))
  }
}

function refusal(request: FastifyRequest, reply: FastifyReply, token: string): AppError | undefined {
  if (!MUTATING.has(request.method)) return undefined
  if (token === '') return errors.forbidden('this agent holds no token, so it takes no change')
  const given = bearerOf(request)
  if (given !== undefined && sameToken(given, token)) return undefined
  void reply.header('www-authenticate', 'Bearer realm="layoutd"')
  return errors.unauthorized(
    given === undefined
      ? 'a change needs Authorization: Bearer <token> (CARLOS_AGENT_TOKEN, CARLOS_AGENT_TOKEN_FILE, or D/agent.token)'
      : "the bearer token is not the agent's",
  )
}

/** `GET /agent` tells where the agent keeps its files: loopback may ask, anyone else only with the token. */
export function privateReadRefusal(request: FastifyRequest, reply: FastifyReply, token: string): AppError | undefined {
  if (isLoopback(request.socket.remoteAddress)) return undefined
  if (token === '') return errors.forbidden('this agent holds no token, so loopback peers only')
  const given = bearerOf(request)
  if (given !== undefined && sameToken(given, token)) return undefined
  void reply.header('www-authenticate', 'Bearer realm="layoutd"')
  return errors.unauthorized('this request needs Authorization: Bearer <token> from beyond loopback')
}
