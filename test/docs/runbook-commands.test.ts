// Every `layoutd …` command the runbook names exists: each command and
// subcommand written in its code (fenced blocks and `code spans`) is asked
// for its --help through the CLI's own dispatcher, which answers 0 only for
// a command it has. An operator who copies a line from the runbook never
// meets "unknown subcommand".
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { PassThrough } from 'node:stream'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { dispatch } from '../../src/cli/dispatch.js'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))

/** Code that quotes what layoutd says (a reason's words), not a command. */
const QUOTED = new Set(['layoutd is starting', '… is set but is no layoutd variable'])

/** The text of every fenced block and every code span of a Markdown page. */
function codeOf(markdown: string): string[] {
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
 * HOST, a host name, a quote); `a|b` names both.
 */
function commandPaths(code: readonly string[]): string[][] {
  const paths = new Map<string, string[]>()
  for (const text of code) {
    for (const m of text.matchAll(
      /(?:^|[\s;(|&`$])layoutd((?:[ \t]+[a-z][a-z-]*(?:\|[a-z][a-z-]*)*(?=\s|$|[;)`]))*)/g,
    )) {
      const words = (m[1] ?? '')
        .trim()
        .split(/[ \t]+/)
        .filter(Boolean)
      let prefixes: string[][] = [[]]
      for (const w of words) prefixes = prefixes.flatMap((p) => w.split('|').map((alt) => [...p, alt]))
      for (const p of prefixes) if (p.length > 0) paths.set(p.join(' '), p)
    }
  }
  return [...paths.values()]
}

async function exists(words: readonly string[]): Promise<{ code: number; said: string }> {
  let said = ''
  const sink = new PassThrough().setEncoding('utf8').on('data', (s: string) => (said += s))
  const code = await dispatch([...words, '--help'], { environ: {}, stdout: new PassThrough(), stderr: sink })
  return { code, said }
}

void test('every layoutd command the runbook names is one the CLI has', async () => {
  const text = await fs.readFile(path.join(ROOT, 'docs/runbook.md'), 'utf8')
  const paths = commandPaths(codeOf(text))
  assert.ok(paths.length > 10, `the runbook's commands were found (${paths.length})`)
  const missing: string[] = []
  for (const p of paths) {
    const { code, said } = await exists(p)
    if (code !== 0) missing.push(`layoutd ${p.join(' ')}: ${said.split('\n')[0] ?? ''}`)
  }
  assert.deepEqual(missing, [], 'commands docs/runbook.md names that the CLI does not have')
})

void test('the reader of the runbook finds a command and its subcommands, not the words around them', () => {
  const code = codeOf(
    [
      'prose layoutd is starting, not code',
      '```sh',
      'layoutd journal release HOST --dry-run   # a comment',
      'layoutd status a.example.com',
      '```',
      'record it (`layoutd intent flat|nested`), | `layoutd intent migrate\\|revert` |',
      '`systemctl restart layoutd`',
    ].join('\n'),
  )
  assert.deepEqual(commandPaths(code), [
    ['journal', 'release'],
    ['status'],
    ['intent', 'flat'],
    ['intent', 'nested'],
    ['intent', 'migrate'],
    ['intent', 'revert'],
  ])
})
