// The tree keeps the shape a newcomer relies on: every file under src/ is
// named in docs/architecture.md (and the page names no file that is gone),
// each opens with a comment saying what it owns, and the page's line for
// each file is the first sentence of that comment, as scripts/architecture.mjs
// (`npm run docs`) generates it. A file is as long as its one concern
// needs: the budget is on functions (eslint.config.js). Like the
// openapi.yaml test, this fails on drift rather than trusting a later
// clean-up.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { tmpDir } from './helpers/tmp.js'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

/** A line of the page that differs from what its file's comment says (null: no such line, or no such file). */
interface Drift {
  file: string
  had: string | null
  want: string | null
}

/** What scripts/architecture.mjs exports (plain ESM, so its types are stated here). */
interface Architecture {
  generate: (root: string) => { text: string; drift: Drift[]; errors: string[] }
  describe: (drift: Drift[]) => string[]
  summaryLine: (file: string, text: string) => string
}

async function architecture(): Promise<Architecture> {
  return (await import(pathToFileURL(path.join(ROOT, 'scripts/architecture.mjs')).href)) as Architecture
}

async function sourceFiles(): Promise<string[]> {
  const entries = await fs.readdir(path.join(ROOT, 'src'), { recursive: true, withFileTypes: true })
  return entries
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => path.relative(ROOT, path.join(e.parentPath, e.name)))
    .sort()
}

void test('docs/architecture.md names every file under src/, and no file that is not there', async () => {
  const page = await fs.readFile(path.join(ROOT, 'docs/architecture.md'), 'utf8')
  const named = new Set(page.match(/src\/[A-Za-z0-9/_.-]*\.ts/g) ?? [])
  const present = await sourceFiles()
  assert.ok(present.length > 50, `found only ${present.length} source files under ${ROOT}src`)
  assert.deepEqual(
    present.filter((f) => !named.has(f)),
    [],
    'files docs/architecture.md does not name (give each its line)',
  )
  assert.deepEqual(
    [...named].filter((f) => !present.includes(f)).sort(),
    [],
    'files docs/architecture.md names that are gone',
  )
})

void test('every file under src/ opens with a comment saying what it owns', async () => {
  const silent: string[] = []
  for (const file of await sourceFiles()) {
    const text = await fs.readFile(path.join(ROOT, file), 'utf8')
    if (!/^(#![^\n]*\n)?\/\/ \S/.test(text)) silent.push(file)
  }
  assert.deepEqual(silent, [], 'files that do not open with a comment')
})

void test("docs/architecture.md's lists are the first sentences of the files' opening comments (npm run docs)", async () => {
  const { generate, describe } = await architecture()
  const { drift, errors } = generate(ROOT)
  assert.deepEqual(errors, [], 'files no generated list of docs/architecture.md takes')
  assert.deepEqual(
    drift.map((d) => d.file),
    [],
    `docs/architecture.md differs from the opening comments; \`npm run docs\` rewrites it:\n${describe(drift).join('\n')}`,
  )
})

void test("a file's line is the first sentence of its opening comment's first paragraph", async () => {
  const { summaryLine } = await architecture()
  const line = (text: string) => summaryLine('src/x.ts', text)
  assert.equal(line('// One. Two.\nconst x = 1\n'), '- `src/x.ts` — One.')
  assert.equal(line('#!/usr/bin/env node\n// Runs it.\n'), '- `src/x.ts` — Runs it.', 'after a #! line')
  assert.equal(
    line('// A long first\n// sentence, wrapped. Then more.\n'),
    '- `src/x.ts` — A long first sentence, wrapped.',
  )
  assert.equal(
    line('// No full stop\n//\n// Second paragraph.\n'),
    '- `src/x.ts` — No full stop',
    'a blank line ends it',
  )
  assert.equal(
    line('// Calls `a. b` (design §3.3, e.g. step 5. again) and POST /v3/... with keys. More.\n'),
    '- `src/x.ts` — Calls `a. b` (design §3.3, e.g. step 5. again) and POST /v3/... with keys.',
    'no end inside code, brackets, an ellipsis or e.g.',
  )
  assert.equal(
    line('// What `<data>/layout` and <data>/layout hold.\n'),
    '- `src/x.ts` — What `<data>/layout` and \\<data>/layout hold.',
    'a < outside code is escaped, so the rendered page shows it',
  )
})

void test('the check names each file whose line drifted, is missing, is gone, is named twice, or has no list', async (t) => {
  const { generate } = await architecture()
  const root = await tmpDir(t, 'layoutd-tree-')
  const write = async (file: string, text: string) => {
    await fs.mkdir(path.dirname(path.join(root, file)), { recursive: true })
    await fs.writeFile(path.join(root, file), text)
  }
  await write('src/a.ts', '// What a owns. More.\n')
  await write('src/b.ts', '// What b owns.\n')
  await write('src/part/c.ts', '// What c owns.\n')
  const marker = (folder: string) => `<!-- generated by scripts/architecture.mjs: ${folder} -->`
  await write(
    'docs/architecture.md',
    [
      '# Page',
      '',
      marker('src/*'),
      '- `src/a.ts` — what a owned once.',
      '- `src/a.ts` — What a owns.',
      '- `src/gone.ts` — gone.',
      '<!-- end generated -->',
      '',
    ].join('\n'),
  )
  const { drift, errors } = generate(root)
  assert.deepEqual(errors, ['src/part/c.ts: no list on docs/architecture.md takes it (add a marker for its folder)'])
  assert.deepEqual(
    drift.map((d) => [d.file, d.had !== null, d.want !== null]),
    [
      ['src/a.ts', true, true],
      ['src/b.ts', false, true],
      ['src/a.ts', true, false],
      ['src/gone.ts', true, false],
    ],
  )
  await write(
    'docs/architecture.md',
    [
      '# Page',
      '',
      marker('src/*'),
      '<!-- end generated -->',
      '',
      marker('src/part/'),
      '<!-- end generated -->',
      '',
    ].join('\n'),
  )
  const fixed = generate(root)
  assert.deepEqual(fixed.errors, [])
  assert.equal(
    fixed.text,
    [
      '# Page',
      '',
      marker('src/*'),
      '- `src/a.ts` — What a owns.',
      '- `src/b.ts` — What b owns.',
      '<!-- end generated -->',
      '',
      marker('src/part/'),
      '- `src/part/c.ts` — What c owns.',
      '<!-- end generated -->',
      '',
    ].join('\n'),
  )
})

void test('docs/architecture.md names every file of scripts/', async () => {
  const page = await fs.readFile(path.join(ROOT, 'docs/architecture.md'), 'utf8')
  const scripts = (await fs.readdir(path.join(ROOT, 'scripts'))).map((f) => `scripts/${f}`)
  assert.deepEqual(
    scripts.filter((f) => !page.includes(`\`${f}\``)),
    [],
    'files of scripts/ that docs/architecture.md does not name under "Outside src/"',
  )
})
