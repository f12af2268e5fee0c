// GET /: the console page, drawn from what the agent answers. Hostile
// hostnames stay text, the rows are paged, the filter and the search are
// query parameters, and the refresh script's conditional request holds.
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { test } from 'node:test'
import type { RowReport } from '../../src/domain/schemas.js'
import { PAGE_ROWS } from '../../src/routes/console-view.js'
import { build, errorOf } from '../helpers/fake-agent.js'

const HOSTILE = [
  '<script>alert(1)</script>',
  'a"b\'c.example.com',
  '"><img src=x onerror=alert(2)>',
  '{{script}}',
  'two\nlines</td></tr><tr><td>',
  '&amp;.example.com',
]

function row(
  layout: string,
  reason = '',
  note = '',
  code: RowReport['code'] = reason === '' ? '' : 'unknown_shape',
): RowReport {
  return { layout, code, reason, note }
}

/** The text of the page between its tags, roughly: enough to find what a person reads. */
function rowsOf(page: string): string[] {
  return [...page.matchAll(/<tr data-host="([^"]*)"/g)].map((m) => m[1] ?? '')
}

void test('every text from the report is escaped: a host named like <script> or with quotes stays text', async (t) => {
  const { app, agent } = await build(t)
  agent.reportValue = {
    ...agent.reportValue,
    rows: Object.fromEntries(HOSTILE.map((h) => [h, row('foreign', `reason of ${h}`, `<b>note</b> of ${h}`)])),
    warnings: ['<script>alert(3)</script> warning'],
  }
  const res = await app.inject({ method: 'GET', url: `/?q=${encodeURIComponent('"><script>alert(4)</script>')}` })
  assert.equal(res.statusCode, 200)
  // The search matched nothing, so look at every row too.
  const all = await app.inject({ method: 'GET', url: '/' })
  for (const page of [res.body, all.body]) {
    assert.equal(page.match(/<script/g)?.length, 1, 'the one script is the page’s own')
    assert.doesNotMatch(page, /<img/)
    assert.doesNotMatch(page, /<b>note/)
    assert.doesNotMatch(page, /"><script/)
  }
  assert.match(res.body, /value="&quot;&gt;&lt;script&gt;alert\(4\)&lt;\/script&gt;"/)
  assert.match(all.body, /&lt;script&gt;alert\(1\)&lt;\/script&gt;/)
  assert.match(all.body, /data-host="a&quot;b&#39;c\.example\.com"/)
  assert.match(all.body, /&amp;amp;\.example\.com/)
  assert.match(all.body, /<td class="host">\{\{script\}\}<\/td>/, 'a placeholder in a value is not filled')
  assert.match(all.body, /&lt;script&gt;alert\(3\)&lt;\/script&gt; warning/)
  assert.equal(rowsOf(all.body).length, HOSTILE.length)
})

void test('the page carries the report ETag, and the refresh script is allowed by its hash and nothing else', async (t) => {
  const { app } = await build(t)
  const page = await app.inject({ method: 'GET', url: '/' })
  const status = await app.inject({ method: 'GET', url: '/layout/status' })
  const etag = status.headers.etag
  assert.equal(typeof etag, 'string')
  assert.match(page.body, new RegExp(`<body data-etag="${String(etag).replaceAll('"', '&quot;')}">`))
  assert.equal(page.headers['cache-control'], 'no-store')
  const script = /<script>([\s\S]*)<\/script>/.exec(page.body)?.[1] ?? ''
  const style = /<style>([\s\S]*)<\/style>/.exec(page.body)?.[1] ?? ''
  const hash = (s: string): string => `'sha256-${createHash('sha256').update(s).digest('base64')}'`
  const csp = String(page.headers['content-security-policy'])
  assert.match(csp, /default-src 'none'/)
  assert.ok(csp.includes(`script-src ${hash(script)};`), csp)
  assert.ok(csp.includes(`style-src ${hash(style)};`), csp)

  // What the script asks every few seconds: the report with its tag, 304 while it holds.
  const held = await app.inject({ method: 'GET', url: '/layout/status', headers: { 'if-none-match': String(etag) } })
  assert.equal(held.statusCode, 304)
  assert.equal(held.body, '')
})

void test('a box of 10,000 rows is drawn a page at a time, and the word and the search select rows', async (t) => {
  const { app, agent } = await build(t)
  const rows: Record<string, RowReport> = {}
  for (let i = 0; i < 10_000; i++) {
    const host = `t${String(i).padStart(5, '0')}.example.com`
    rows[host] = row(
      i % 10 === 0 ? 'flat' : 'nested',
      i % 10 === 0 ? 'awake: 42m of grace left' : '',
      '',
      i % 10 === 0 ? 'awake_grace' : '',
    )
  }
  agent.reportValue = { ...agent.reportValue, rows }

  const first = await app.inject({ method: 'GET', url: '/' })
  assert.equal(first.statusCode, 200)
  assert.equal(rowsOf(first.body).length, PAGE_ROWS)
  assert.equal(rowsOf(first.body)[0], 't00000.example.com')
  assert.match(first.body, /rows 1–200 of 10000/)
  assert.match(first.body, /page 1 of 50/)
  // The code beside each reason, for what the page (or a script reading it) decides by.
  assert.match(first.body, /<tr data-host="t00000\.example\.com" data-word="flat" data-code="awake_grace">/)
  assert.match(first.body, /<code class="code c-awake_grace">awake_grace<\/code> awake: 42m of grace left/)
  // The markup's layout is Prettier's: whitespace between tags is not what is asserted.
  assert.match(first.body, /<li>\s*<a class="word w-nested" href="\/\?word=nested"\s*>nested<\/a\s*>\s*9000\s*<\/li>/)
  assert.match(first.body, /<li>\s*<a class="word w-flat" href="\/\?word=flat"\s*>flat<\/a\s*>\s*1000\s*<\/li>/)

  const last = await app.inject({ method: 'GET', url: '/?page=50' })
  assert.equal(rowsOf(last.body).at(-1), 't09999.example.com')
  assert.match(last.body, /rows 9801–10000 of 10000/)
  // A page past the end shows the last one.
  assert.deepEqual(rowsOf((await app.inject({ method: 'GET', url: '/?page=999' })).body), rowsOf(last.body))

  const flat = await app.inject({ method: 'GET', url: '/?word=flat&q=T0012' })
  assert.deepEqual(rowsOf(flat.body), ['t00120.example.com'])
  assert.match(flat.body, /awake: 42m of grace left/)
  assert.match(flat.body, /<option value="flat" selected>/)
  assert.match(flat.body, /value="T0012"/)

  const searched = await app.inject({ method: 'GET', url: '/?q=t0999&page=1&word=' })
  assert.deepEqual(
    rowsOf(searched.body),
    Array.from({ length: 10 }, (_, i) => `t0999${i}.example.com`),
  )
})

void test('a word the console does not know, or a page that is not a number, is refused with the envelope', async (t) => {
  const { app } = await build(t)
  for (const url of ['/?word=nestd', '/?page=0', '/?page=x', `/?q=${'a'.repeat(254)}`]) {
    const res = await app.inject({ method: 'GET', url })
    assert.equal(res.statusCode, 400, url)
    assert.equal(errorOf(res.body).code, 'bad_request', url)
  }
})

void test('the page shows the intent, the gate, the leg and the warnings', async (t) => {
  const { app, agent } = await build(t)
  const now = Date.now()
  agent.reportValue = {
    ...agent.reportValue,
    mode: 'nested',
    default: true,
    defaultBlocked: '',
    leg: {
      running: true,
      pending: true,
      lastRun: {
        startedAt: new Date(now - 5000).toISOString(),
        finishedAt: null,
        results: [{ host: 'a.example.com', outcome: 'moved', code: '', reason: '', to: 'nested' }],
      },
      retryAt: new Date(now + 9 * 60_000 + 30_000).toISOString(),
    },
    warnings: ['nested instances share this box with flat ones'],
  }
  const page = (await app.inject({ method: 'GET', url: '/' })).body
  assert.match(page, /<span class="mode m-nested">nested<\/span> by the nested default/)
  assert.match(page, /<span class="phase bad">recovering<\/span>/)
  assert.match(page, /✗ <b>recovery<\/b> recovering 2 journals/)
  assert.match(page, /Gate: nested instances may not wake: isolation probe: not yet run/)
  assert.match(page, /<b class="running">running<\/b>, another run due after this one/)
  assert.match(page, /1 host finished so far \(1 moved\)/)
  assert.match(page, /next retry: <time [^>]*>in 9m<\/time>/)
  assert.match(page, /<li>nested instances share this box with flat ones<\/li>/)
})
