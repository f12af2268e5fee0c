// The fleet page: `GET /fleet`, one server-drawn HTML page of the whole
// fleet as the deploy store holds it (design §6.3; fleet-view.ts draws it).
// It changes nothing, so it takes no token. No script: it reloads itself.
import { createHash } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { DeployStore } from '../domain/ports.js'
import type { RolloutPort } from '../domain/rollout.js'
import { Type } from '../domain/typebox.js'
import { errorMessage, errors } from '../errors.js'
import { html, trusted } from './console-html.js'
import { commonErrors, errorEnvelope } from './error-envelope.js'
import { fleetPart, type Read, type RolloutRead } from './fleet-view.js'

export interface FleetPageOptions {
  /** Opened and closed by the caller; absent, the page answers 404. */
  store: DeployStore | undefined
}

/** A store that does not answer makes that part say so, not the page hang. */
const READ_TIMEOUT_MS = 5_000

async function settle<T>(read: () => Promise<T>): Promise<Read<T>> {
  try {
    return { ok: true, value: await read() }
  } catch (err) {
    return { ok: false, why: errorMessage(err) }
  }
}

/** The rollout in play, or null; its events failing to read leaves the rest drawn. */
async function rolloutInPlay(port: RolloutPort, signal: AbortSignal): Promise<RolloutRead | null> {
  const { current } = await port.active(signal)
  if (current === undefined) return null
  const id = current.record.id
  const [progress, events] = await Promise.all([
    port.progress(id, undefined, signal),
    settle(() => port.events(id, signal)),
  ])
  return { record: current.record, progress, events }
}

export const fleetPageRoutes: FastifyPluginAsyncTypebox<FleetPageOptions> = async (app, { store }) => {
  const [consoleStyle, fleetStyle] = await Promise.all(
    ['console.css', 'fleet.css'].map((f) => readFile(new URL(`./console-page/${f}`, import.meta.url), 'utf8')),
  )
  const style = `${consoleStyle}\n${fleetStyle}`
  const policy = [
    "default-src 'none'",
    `style-src 'sha256-${createHash('sha256').update(style, 'utf8').digest('base64')}'`,
    "script-src 'none'",
    "img-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ')
  app.get(
    '/fleet',
    {
      schema: {
        operationId: 'getFleetPage',
        summary: 'The fleet page',
        description:
          'The whole fleet at a glance, read from the deploy store: every box with its state against the ' +
          'intent addressing it (a box whose agent is gone kept with its last summary), the rollout in play ' +
          'with its waves, their progress, a stopped one’s cause and its deadline, and the intent ' +
          'records newest first. Drawn on the server, without JavaScript; it reloads itself every 10 s. ' +
          'Read-only, so it needs no token.',
        tags: ['console'],
        security: [],
        response: {
          200: {
            description: 'The page.',
            content: {
              'text/html': {
                schema: Type.String({ description: 'An HTML page; every text from the store is escaped.' }),
              },
            },
          },
          400: commonErrors[400],
          404: errorEnvelope('This app was built without a deploy store to read the fleet from.'),
          500: commonErrors[500],
        },
      },
    },
    async (_request, reply) => {
      if (store === undefined) throw errors.notFound('this app has no deploy store to draw the fleet from')
      const signal = AbortSignal.timeout(READ_TIMEOUT_MS)
      const port = store.rollouts?.()
      const [boxes, records, rollout] = await Promise.all([
        settle(async () => {
          if (store.listKnownBoxes !== undefined) return store.listKnownBoxes(signal)
          if (store.listBoxes === undefined) throw new Error(`${store.describe()} keeps no box summaries`)
          return (await store.listBoxes(signal)).map((summary) => ({ summary }))
        }),
        settle(() => store.list(signal)),
        port === undefined ? undefined : settle(() => rolloutInPlay(port, signal)),
      ])
      const page = html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="refresh" content="10"><title>the fleet: layoutd</title><style>${trusted(style)}</style></head>
<body class="fleet"><header><h1>layoutd <span class="box">the fleet</span></h1>
<p class="links"><a href="/">this box</a> · <span>${store.describe()}</span></p></header>
<main id="live">${fleetPart({ boxes, records, rollout, now: Date.now() })}</main>
<footer><p>Read-only: this page changes nothing. It reloads itself every 10 s.</p></footer></body></html>`
      return reply
        .type('text/html; charset=utf-8')
        .header('cache-control', 'no-store')
        .header('content-security-policy', policy)
        .header('x-content-type-options', 'nosniff')
        .header('referrer-policy', 'no-referrer')
        .send(page.text)
    },
  )
}
