// The token the test apps require, and the one place their requests get it:
// authorise() makes `app.inject` carry `Authorization: Bearer <token>`
// unless a request names its own Authorization header, and answers the
// inject that sends none, for the tests of a refusal.
import type { InjectOptions, LightMyRequestResponse } from 'fastify'
import type { App } from '../../src/app.js'

/** The bearer token of every test app, unless a test gives its own. */
export const TEST_TOKEN = 'test-token-5f0c9a1e7b3d4c2a'

/** An inject as the app's own, with no header added. */
export type Inject = (opts: InjectOptions | string) => Promise<LightMyRequestResponse>

/** Makes app.inject send the token by default; answers the inject that sends only what a test gives it. */
export function authorise(app: App, token: string = TEST_TOKEN): Inject {
  const bare = app.inject.bind(app) as Inject
  const authorised: Inject = (opts) => {
    const o = typeof opts === 'string' ? { url: opts } : opts
    const headers = (o.headers ?? {}) as Record<string, unknown>
    if (token === '' || Object.keys(headers).some((k) => k.toLowerCase() === 'authorization')) return bare(o)
    return bare({ ...o, headers: { ...headers, authorization: `Bearer ${token}` } })
  }
  app.inject = authorised as App['inject']
  return bare
}
