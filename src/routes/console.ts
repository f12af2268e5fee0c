// The console: `GET /`, one server-drawn HTML page of the box (design §6.3).
// It only reads, so it takes no token. Its template, style and script are in
// src/routes/console-page/, copied beside this module by the build.
import { createHash } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '../domain/typebox.js'
import type { AgentApi } from '../agent-api.js'
import { fill, html, trusted, type Html } from './console-html.js'
import { filterForm, livePart, ROW_WORDS, rowsDrawnSoon, type ConsoleInput, type ConsoleQuery } from './console-view.js'
import { commonErrors } from './error-envelope.js'
import { etagOf } from '../report/etag.js'

export interface ConsoleRoutesOptions {
  api: AgentApi
}

/** What a page asks beside the report. */
type PageAsk = Omit<ConsoleInput, 'report'>

/** From the report built in slices (design §6.2), with its tag. */
async function drawLive(api: AgentApi, ask: PageAsk): Promise<{ box: string; tag: string; live: Html }> {
  const { report, tag } = await api.reportSoon()
  const drawn = await rowsDrawnSoon(report.rows, ask.query)
  return { box: report.box, tag, live: livePart({ report, ...ask, drawn }) }
}

const QueryText = Type.Object({
  word: Type.Optional(
    Type.Union([...ROW_WORDS.map((w) => Type.Literal(w)), Type.Literal('')], {
      description: `Show only the rows of this word: ${ROW_WORDS.join(', ')}; empty or absent for every row.`,
    }),
  ),
  q: Type.Optional(
    Type.String({
      maxLength: 253,
      description: 'Show only the hosts containing this text, in any case; empty or absent for every host.',
    }),
  ),
  page: Type.Optional(
    Type.String({
      pattern: '^[1-9][0-9]{0,5}$',
      description: 'Which page of rows, from 1 (the rows are shown 200 a page, sorted by host).',
    }),
  ),
})

interface Assets {
  template: string
  style: string
  script: string
  /** Nothing runs or styles the page but the two pieces shipped, by their hashes. */
  policy: string
}

function sha256(text: string): string {
  return `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`
}

async function loadAssets(): Promise<Assets> {
  const read = (name: string): Promise<string> => readFile(new URL(`./console-page/${name}`, import.meta.url), 'utf8')
  const [template, style, script] = await Promise.all([read('page.html'), read('console.css'), read('console.js')])
  const policy = [
    "default-src 'none'",
    `style-src ${sha256(style)}`,
    `script-src ${sha256(script)}`,
    "connect-src 'self'",
    "img-src 'self'",
    "form-action 'self'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ].join('; ')
  return { template, style, script, policy }
}

export const consoleRoutes: FastifyPluginAsyncTypebox<ConsoleRoutesOptions> = async (app, { api }) => {
  const assets = await loadAssets()
  app.get(
    '/',
    {
      schema: {
        operationId: 'getConsole',
        summary: 'The console page',
        description:
          'The box at a glance, for a person in a browser: the intent and the default, ' +
          'readiness and the isolation gate, rows by word, the leg, ' +
          'the warnings and the rows with their reasons and notes, 200 a page. ' +
          'Drawn on the server, it works without JavaScript; ' +
          "with it, the page asks `GET /layout/status` with the report's ETag every few seconds " +
          'and redraws itself only when the report changed. ' +
          'Read-only, so it needs no token.',
        tags: ['console'],
        security: [],
        querystring: QueryText,
        response: {
          200: {
            description: 'The page.',
            content: {
              'text/html': {
                schema: Type.String({ description: 'An HTML page; every text from the report is escaped.' }),
              },
            },
          },
          400: commonErrors[400],
          500: commonErrors[500],
        },
      },
    },
    async (request, reply) => {
      const query: ConsoleQuery = {
        word: request.query.word ?? '',
        q: request.query.q ?? '',
        page: Number(request.query.page ?? '1'),
      }
      // The page carries the tag its script asks GET /layout/status about.
      const ask: PageAsk = { readiness: api.readiness(), query, now: Date.now(), intent: api.intentRecord?.() ?? null }
      const { box, tag, live } = await drawLive(api, ask)
      const etag = etagOf(tag)
      const page = fill(assets.template, {
        title: html`${box}: layoutd`,
        style: trusted(assets.style),
        script: trusted(assets.script),
        etag: html`${etag}`,
        box: html`${box}`,
        filters: filterForm(query),
        live,
      })
      return reply
        .type('text/html; charset=utf-8')
        .header('cache-control', 'no-store')
        .header('content-security-policy', assets.policy)
        .header('x-content-type-options', 'nosniff')
        .header('referrer-policy', 'no-referrer')
        .send(page.text)
    },
  )
}
