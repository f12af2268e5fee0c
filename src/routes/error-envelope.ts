// The one shape of every error answer, `{"error": {"code", "message"}}`, as a
// schema the routes list under each status they may answer.
import { Type } from '../domain/typebox.js'
import type { Static } from 'typebox'

/** One component, which every envelope refers to. */
const ErrorDetail = Type.Object(
  {
    code: Type.String({ description: 'A stable, machine-readable code such as `bad_request` or `intent_unreadable`.' }),
    message: Type.String({ description: 'What was wrong, for a person; `internal error` for any unexpected failure.' }),
  },
  { title: 'ErrorDetail', additionalProperties: false, description: 'What went wrong.' },
)

export function errorEnvelope(description: string) {
  return Type.Object({ error: ErrorDetail }, { additionalProperties: false, description })
}

export type ErrorEnvelope = Static<ReturnType<typeof errorEnvelope>>

export function envelope(code: string, message: string): ErrorEnvelope {
  return { error: { code, message } }
}

/** The answers any route may give. */
export const commonErrors = {
  400: errorEnvelope('The request was malformed: a query or body field, or the JSON itself; the message names what.'),
  500: errorEnvelope('An unexpected failure; the message is always `internal error` and the details are in the log.'),
}

/** Before any route (design §6); input-less routes list them too. */
export const parserErrors = {
  431: errorEnvelope(
    'The request headers are larger than the limit (`headers_too_large`); answered before any route sees the request.',
  ),
}

/** The answers of a mutating route, on top of commonErrors. */
export const mutationErrors = {
  401: errorEnvelope(
    'A token is configured and the request lacks `Authorization: Bearer <token>`, or carries another one.',
  ),
  403: errorEnvelope('No token is configured, so mutations are accepted from loopback peers only.'),
  413: errorEnvelope('The request body is larger than the limit.'),
  415: errorEnvelope('The request body has a content type the API does not read (send application/json).'),
}
