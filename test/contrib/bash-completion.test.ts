// contrib/layoutd.bash-completion, sourced in a real bash: it completes
// every command, subcommand and option the CLI's usage names (so a new one
// without its completion fails here), and the values of --kind.
import assert from 'node:assert/strict'
import path from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { USAGE } from '../../src/cli/dispatch.js'
import { run } from '../helpers/child.js'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))
const SCRIPT = path.join(ROOT, 'contrib/layoutd.bash-completion')

/** What bash offers for the command line `words`, the last being the word under the cursor. */
async function complete(...words: string[]): Promise<string[]> {
  const script = `source "$0"; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _layoutd; printf '%s\\n' "\${COMPREPLY[@]}"`
  const { stdout } = await run('bash', ['--norc', '--noprofile', '-c', script, SCRIPT, ...words])
  return stdout.split('\n').filter(Boolean)
}

/** Each command of the usage, with its subcommand (or none) and the options it names. */
function usageEntries(): Array<{ cmd: string; sub: string | undefined; flags: string[] }> {
  const merged: string[] = []
  for (const line of USAGE.split('\n').slice(1)) {
    if (/^\s*\[/.test(line) && merged.length > 0) merged[merged.length - 1] += ` ${line.trim()}`
    else if (line.trim() !== '') merged.push(line.trim())
  }
  const out: Array<{ cmd: string; sub: string | undefined; flags: string[] }> = []
  for (const line of merged) {
    // `a | b` between two commands; `(--box LABEL | --fleet)` inside one is not a split.
    for (const segment of line.split(/ \| (?=[a-z]+ )/)) {
      const words = segment.replace(/^layoutd\s+/, '').split(/\s+/)
      const [cmd, second] = words
      if (cmd === undefined || !/^[a-z]+$/.test(cmd)) continue
      // The usage's own words after the command, not the options it lists: "the agent", "the report, …".
      const flags = [...segment.split(/\s{2,}/)[0]!.matchAll(/--[a-z][a-z-]*/g)].map((m) => m[0])
      const subs = second !== undefined && /^[a-z]+(\|[a-z]+)*$/.test(second) ? second.split('|') : [undefined]
      for (const sub of subs) out.push({ cmd, sub, flags })
    }
  }
  return out
}

void test('the completion registers for layoutd', async () => {
  const { stdout } = await run('bash', ['--norc', '--noprofile', '-c', 'source "$0"; complete -p layoutd', SCRIPT])
  assert.equal(stdout.trim(), 'complete -F _layoutd layoutd')
})

void test('the command names complete, and a prefix narrows them', async () => {
  const entries = usageEntries()
  const commands = [...new Set(entries.map((e) => e.cmd))]
  assert.deepEqual(commands.sort(), ['converge', 'fleet', 'intent', 'journal', 'registry', 'routes', 'serve', 'status'])
  const offered = await complete('layoutd', '')
  assert.deepEqual(
    commands.filter((c) => !offered.includes(c)),
    [],
    'commands bash does not offer',
  )
  assert.ok(offered.includes('--version') && offered.includes('--help'))
  assert.deepEqual(await complete('layoutd', 'ro'), ['routes'])
  assert.deepEqual(await complete('layoutd', 'co'), ['converge'])
  assert.deepEqual(await complete('layoutd', 'zz'), [])
})

void test('every subcommand and every option the usage names completes', async () => {
  const entries = usageEntries()
  for (const cmd of ['routes', 'intent', 'registry', 'fleet']) {
    const subs = entries.filter((e) => e.cmd === cmd && e.sub !== undefined).map((e) => e.sub ?? '')
    assert.ok(subs.length >= 2, `${cmd} has subcommands in the usage`)
    const offered = await complete('layoutd', cmd, '')
    assert.deepEqual(
      subs.filter((s) => !offered.includes(s)),
      [],
      `${cmd}: subcommands bash does not offer`,
    )
  }
  // The rollout's actions: `fleet rollout a|b|c`, and `… | b|c [-m MSG]` after a bar.
  const actions = new Set<string>()
  for (const m of USAGE.matchAll(/fleet rollout ([a-z|]+)|\| ([a-z]+(?:\|[a-z]+)*) (?=[A-Z[])/g))
    for (const a of (m[1] ?? m[2] ?? '').split('|')) if (a !== '') actions.add(a)
  for (const a of ['history', 'retry', 'skip', 'promote']) assert.ok(actions.has(a), `the usage names rollout ${a}`)
  const offered = await complete('layoutd', 'fleet', 'rollout', '')
  assert.deepEqual(
    [...actions].filter((a) => !offered.includes(a)),
    [],
    'fleet rollout: actions bash does not offer',
  )
  for (const { cmd, sub, flags } of entries) {
    const line = sub === undefined ? ['layoutd', cmd, '--'] : ['layoutd', cmd, sub, 'x', '--']
    const offered = await complete(...line)
    assert.deepEqual(
      flags.filter((f) => !offered.includes(f)),
      [],
      `${line.join(' ')}: options bash does not offer`,
    )
    assert.ok(offered.includes('--help'), `${line.join(' ')} offers --help`)
  }
})

void test('option values: --kind offers the kinds, --dir and routes import complete a path', async () => {
  assert.deepEqual(await complete('layoutd', 'routes', 'add', 'a.example.com', '--kind', 's'), [
    'sidecar',
    'static',
    'service',
  ])
  const dirs = await complete('layoutd', 'routes', 'add', 'a.example.com', '--dir', path.join(ROOT, 'contri'))
  assert.deepEqual(dirs, [path.join(ROOT, 'contrib')])
  assert.deepEqual(
    await complete('layoutd', 'routes', 'import', path.join(ROOT, 'contri')),
    [path.join(ROOT, 'contrib')],
    'routes import takes a file',
  )
})
