// Every name an operator is told exists: each `layoutd …` command and
// subcommand written as code (fenced blocks and `code spans`) in the
// README, the runbook and the design, and in the agent's own messages (the
// code spans of src/'s strings: errors, advice, warnings), is asked for its
// --help through the CLI's own dispatcher, which answers 0 only for a
// command it has; every CARLOS_* variable those pages and strings name is
// one layoutd reads (src/config.ts) or knows. An operator who copies a line
// from the docs or from an error never meets "unknown subcommand", nor sets
// a variable nothing reads.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { PassThrough } from 'node:stream'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { dispatch } from '../../src/cli/dispatch.js'
import { ENVIRONMENT } from '../../src/config.js'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))

const PAGES = ['README.md', 'docs/runbook.md', 'docs/design.md']

/** Code that quotes what layoutd says (a reason's words), not a command. */
const QUOTED = new Set(['layoutd is starting', '… is set but is no layoutd variable'])

/** Variables layoutd does not read but knows: the key the activator hands a tenant (design §4.5). */
const KNOWN_ELSEWHERE = new Set(['CARLOS_INSTANCE_KEY'])

/**
 * A name written as a slip on purpose: the design's example of a
 * misspelt variable that is refused naming the one meant (design §8).
 */
const SLIP_EXAMPLES = new Set(['CARLOS_DATADIR'])

const VARIABLE = /\bCARLOS_[A-Z0-9]+(?:_[A-Z0-9]+)*\b/g

/** The text of every fenced block and every code span of a Markdown text. */
export function codeOf(markdown: string): string[] {
  const out: string[] = []
  const rest = markdown.replace(/^```[^\n]*\n([\s\S]*?)^```/gm, (_all, block: string) => {
    out.push(block)
    return ''
  })
  for (const m of rest.matchAll(/`([^`\n]+)`/g)) if (!QUOTED.has(m[1] ?? '')) out.push(m[1] ?? '')
  // A pipe in a table cell is written \|.
  return out.map((c) => c.replaceAll('\\|', '|'))
}

/**
 * The command paths named in code: the words after `layoutd` up to the
 * first that is not a command's name (an option, a placeholder such as
 * HOST, a host name, a quote) or a run of spaces (a listing's description
 * column); `a|b` names both. `docker exec layoutd layoutd status` names
 * `status`: the first `layoutd` is the container.
 */
function commandPaths(code: readonly string[]): string[][] {
  const paths = new Map<string, string[]>()
  for (const text of code) {
    for (const m of text.matchAll(
      /(?:^|[\s;(|&`$])layoutd((?:[ \t][a-z][a-z-]*(?:\|[a-z][a-z-]*)*(?=\s|$|[;)`]))*)/g,
    )) {
      const words = (m[1] ?? '')
        .trim()
        .split(/[ \t]+/)
        .filter(Boolean)
      while (words[0] === 'layoutd') words.shift()
      let prefixes: string[][] = [[]]
      for (const w of words) prefixes = prefixes.flatMap((p) => w.split('|').map((alt) => [...p, alt]))
      for (const p of prefixes) if (p.length > 0) paths.set(p.join(' '), p)
    }
  }
  return [...paths.values()]
}

/** The text of every string literal and template of a TypeScript source; a substitution reads as `X`. */
export function stringsOf(source: string): string[] {
  const out: string[] = []
  const visit = (node: ts.Node): void => {
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) out.push(node.text)
    else if (ts.isTemplateExpression(node))
      out.push(node.head.text + node.templateSpans.map((s) => `X${s.literal.text}`).join(''))
    ts.forEachChild(node, visit)
  }
  visit(ts.createSourceFile('x.ts', source, ts.ScriptTarget.Latest, false))
  return out
}

async function srcFiles(): Promise<string[]> {
  const entries = await fs.readdir(path.join(ROOT, 'src'), { recursive: true, withFileTypes: true })
  return entries
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => path.relative(ROOT, path.join(e.parentPath, e.name)))
    .sort()
}

/** Where each text comes from, and the code it names commands in. */
async function sources(): Promise<{ where: string; text: string; code: string[] }[]> {
  const out: { where: string; text: string; code: string[] }[] = []
  for (const page of PAGES) {
    const text = await fs.readFile(path.join(ROOT, page), 'utf8')
    out.push({ where: page, text, code: codeOf(text) })
  }
  for (const file of await srcFiles()) {
    const strings = stringsOf(await fs.readFile(path.join(ROOT, file), 'utf8'))
    out.push({ where: file, text: strings.join('\n'), code: strings.flatMap(codeOf) })
  }
  return out
}

async function exists(words: readonly string[]): Promise<{ code: number; said: string }> {
  let said = ''
  const sink = new PassThrough().setEncoding('utf8').on('data', (s: string) => (said += s))
  const code = await dispatch([...words, '--help'], { environ: {}, stdout: new PassThrough(), stderr: sink })
  return { code, said }
}

/** The commands of the texts that the CLI does not have, each with where it is named. */
async function missingCommands(texts: readonly { where: string; code: string[] }[]): Promise<string[]> {
  const missing: string[] = []
  for (const { where, code } of texts) {
    for (const p of commandPaths(code)) {
      const { code: status, said } = await exists(p)
      if (status !== 0) missing.push(`${where}: layoutd ${p.join(' ')}: ${said.split('\n')[0] ?? ''}`)
    }
  }
  return missing
}

/** The CARLOS_* names of the texts that layoutd neither reads nor knows, each with where it is named. */
function unknownVariables(texts: readonly { where: string; text: string }[]): string[] {
  const known = new Set([...Object.values(ENVIRONMENT).map((v) => v.env), ...KNOWN_ELSEWHERE, ...SLIP_EXAMPLES])
  const out = new Set<string>()
  for (const { where, text } of texts) {
    for (const m of text.matchAll(VARIABLE)) if (!known.has(m[0])) out.add(`${where}: ${m[0]}`)
  }
  return [...out]
}

void test('every layoutd command the docs and the messages name is one the CLI has', async () => {
  const texts = await sources()
  const named = texts.reduce((n, t) => n + commandPaths(t.code).length, 0)
  assert.ok(named > 60, `the commands were found (${named})`)
  assert.deepEqual(await missingCommands(texts), [], 'commands named that the CLI does not have')
})

void test('every CARLOS_* variable the docs and the messages name is one layoutd reads', async () => {
  const texts = await sources()
  const named = texts.reduce((n, t) => n + [...t.text.matchAll(VARIABLE)].length, 0)
  assert.ok(named > 100, `the variables were found (${named})`)
  assert.deepEqual(unknownVariables(texts), [], 'variables named that layoutd does not read')
})

void test('a wrong name is found: a command, a subcommand, a variable, in a page or a message', async () => {
  const page = ['run `layoutd journal purge HOST`', '```sh', 'CARLOS_ETCD_ENDPOINTS=x layoutd serve', '```'].join('\n')
  const message = "const s = `no journal ${name}: see \\`layoutd journals list\\``; const t = 'set CARLOS_BOXX'"
  const texts = [
    { where: 'page', text: page, code: codeOf(page) },
    { where: 'src', text: stringsOf(message).join('\n'), code: stringsOf(message).flatMap(codeOf) },
  ]
  const commands = await missingCommands(texts)
  assert.deepEqual(
    commands.map((c) => /^\w+: layoutd [a-z ]+/.exec(c)?.[0]),
    ['page: layoutd journal purge', 'src: layoutd journals list'],
  )
  assert.deepEqual(unknownVariables(texts), ['page: CARLOS_ETCD_ENDPOINTS', 'src: CARLOS_BOXX'])
})

void test('the reader finds a command and its subcommands, not the words around them', () => {
  const code = codeOf(
    [
      'prose layoutd is starting, not code',
      '```sh',
      'layoutd journal release HOST --dry-run   # a comment',
      'layoutd status a.example.com',
      'layoutd converge [--wait]     kick the leg',
      'docker exec layoutd layoutd routes list',
      '```',
      'record it (`layoutd intent flat|nested`), | `layoutd intent migrate\\|revert` |',
      '`systemctl restart layoutd`',
    ].join('\n'),
  )
  assert.deepEqual(commandPaths(code), [
    ['journal', 'release'],
    ['status'],
    ['converge'],
    ['routes', 'list'],
    ['intent', 'flat'],
    ['intent', 'nested'],
    ['intent', 'migrate'],
    ['intent', 'revert'],
  ])
})
