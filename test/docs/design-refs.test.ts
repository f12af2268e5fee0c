// Every section of docs/design.md a comment or a page cites exists: a
// `design §3.3`, a `§4.1` in a list after it, a `§3 step 5` or `§3 steps
// 6–7` names a numbered heading of design.md (`## 3.`, `### 3.3`), a step
// names a numbered item under that heading, and a quoted title after it
// (`§3.3 "Many hosts"`) is words of that section. Comments cite the design
// for the why, so a section renumbered or removed would leave the code
// pointing at nothing; this fails on that, listing each reference. Every
// `§` in src/, test/, bench/, scripts/, docs/*.md and README.md is read as
// the design's, except one that cites an RFC (`RFC 9110 §13.1.2`).
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))

const SECTION = String.raw`§(\d+(?:\.\d+)*)`
// Between words, a reference may wrap onto the next comment line.
const GAP = String.raw`(?:[ \t]|\n[ \t]*(?:\/\/|\*|#)?)+`
const NUMBERS = String.raw`\d+(?:[–-]\d+)?(?:(?:,|${GAP}and)${GAP}(?:steps?${GAP})?\d+(?:[–-]\d+)?)*`
const TITLE = String.raw`(?:,?${GAP}"([^"]{1,80})")?`
const REFERENCE = new RegExp(String.raw`(?<!RFC \d+ )${SECTION}(?:${GAP}steps?${GAP}(${NUMBERS}))?${TITLE}`, 'g')

interface Heading {
  number: string
  /** Where the section's text starts and ends in design.md (up to the next heading of its level or above). */
  start: number
  end: number
}

/** The numbered headings of design.md: `## 3. The move` is 3, `### 3.1 The steps` is 3.1. */
function headings(design: string): Map<string, Heading> {
  const found: (Heading & { level: number })[] = []
  for (const m of design.matchAll(/^(#{2,6}) (\d+(?:\.\d+)*)\.? /gm)) {
    found.push({ number: m[2] ?? '', level: (m[1] ?? '').length, start: m.index, end: design.length })
  }
  for (const [i, h] of found.entries()) {
    const next = found.slice(i + 1).find((o) => o.level <= h.level)
    if (next !== undefined) h.end = next.start
  }
  return new Map(found.map((h) => [h.number, h]))
}

/** The step numbers a reference names: `5`, `6–7`, `5, 8, 9`, `5, step 7`. */
function steps(numbers: string): number[] {
  const out: number[] = []
  for (const m of numbers.matchAll(/(\d+)(?:[–-](\d+))?/g)) {
    out.push(Number(m[1]))
    if (m[2] !== undefined) out.push(Number(m[2]))
  }
  return out
}

/** Words as they compare: lower case, one space, no comment marks or Markdown emphasis. */
function words(text: string): string {
  return text
    .replace(/\n\s*(?:\/\/|\*|#)?/g, ' ')
    .replace(/[*_`]/g, '')
    .replace(/\s+/g, ' ')
    .toLowerCase()
}

/** What is wrong with one reference, or null: no such section, no such numbered step in it, or no such words. */
function dangling(design: string, sections: Map<string, Heading>, m: RegExpMatchArray): string | null {
  const [, section = '', numbers, title] = m
  const heading = sections.get(section)
  if (heading === undefined) return `design.md has no section ${section}`
  const text = design.slice(heading.start, heading.end)
  const missing = steps(numbers ?? '').filter((n) => !new RegExp(String.raw`^${n}\. `, 'm').test(text))
  if (missing.length > 0) return `§${section} has no step ${missing.join(', ')}`
  if (title !== undefined && !words(text).includes(words(title))) return `§${section} does not say "${title}"`
  return null
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await fs.readdir(path.join(ROOT, dir), { recursive: true, withFileTypes: true })
  return entries.filter((e) => e.isFile()).map((e) => path.relative(ROOT, path.join(e.parentPath, e.name)))
}

async function citingFiles(): Promise<string[]> {
  const docs = (await fs.readdir(path.join(ROOT, 'docs'))).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)
  const trees = await Promise.all(['src', 'test', 'bench', 'scripts'].map(filesUnder))
  return [...trees.flat().filter((f) => /\.(?:ts|mjs|js|sh|md|html|css)$/.test(f)), ...docs, 'README.md'].sort()
}

/** Every reference in a text that does not resolve, as `line: what it says: why`. */
function danglingIn(text: string, design: string, sections: Map<string, Heading>): string[] {
  const out: string[] = []
  for (const m of text.matchAll(REFERENCE)) {
    const why = dangling(design, sections, m)
    if (why === null) continue
    const line = text.slice(0, m.index).split('\n').length
    out.push(`${line}: ${m[0].replace(/\s+(?:\/\/|\*|#)?\s*/g, ' ')}: ${why}`)
  }
  return out
}

void test('every design § that the code, the tests and the docs cite is a section of docs/design.md', async () => {
  const design = await fs.readFile(path.join(ROOT, 'docs/design.md'), 'utf8')
  const sections = headings(design)
  assert.ok(sections.size > 30, `found only ${sections.size} numbered headings in docs/design.md`)
  const bad: string[] = []
  let references = 0
  for (const file of await citingFiles()) {
    const text = await fs.readFile(path.join(ROOT, file), 'utf8')
    references += [...text.matchAll(REFERENCE)].length
    for (const d of danglingIn(text, design, sections)) bad.push(`${file}:${d}`)
  }
  assert.ok(references > 500, `found only ${references} references; is the pattern still right?`)
  assert.deepEqual(bad, [], 'references to sections or steps docs/design.md does not have')
})

void test('the reference reader resolves sections and steps, across a wrapped comment line', () => {
  // Built with S so this file cites nothing itself.
  const S = '§'
  const design = ['## 3. Move', '### 3.1 Steps', '1. a', '2. b', '### 3.2 Outcomes', '## 4. Recovery', ''].join('\n')
  const sections = headings(design)
  assert.deepEqual([...sections.keys()], ['3', '3.1', '3.2', '4'])
  const check = (text: string) => danglingIn(text, design, sections)
  assert.deepEqual(check(`(design ${S}3.1, ${S}4) and ${S}3 steps 1–2`), [])
  assert.deepEqual(check(`(design ${S}3.2.`), [], 'a full stop after a number ends the sentence')
  assert.deepEqual(check(`RFC 9110 ${S}13.1.2`), [], 'an RFC section is not the design')
  assert.deepEqual(check(`design ${S}5, ${S}3.9`), [
    `1: ${S}5: design.md has no section 5`,
    `1: ${S}3.9: design.md has no section 3.9`,
  ])
  assert.deepEqual(check(`x\n// (design ${S}3\n// step 5, step 2)`), [`2: ${S}3 step 5, step 2: ${S}3 has no step 5`])
  assert.deepEqual(check(`${S}3.2 step 1`), [`1: ${S}3.2 step 1: ${S}3.2 has no step 1`], 'a step of another section')
  assert.deepEqual(
    check(`(design ${S}3 "Outcomes", ${S}3.1, "a\n// 2. b")`),
    [],
    'a title, wrapped or not, of the section',
  )
  assert.deepEqual(check(`(design ${S}4 "Steps")`), [`1: ${S}4 "Steps": ${S}4 does not say "Steps"`])
})
