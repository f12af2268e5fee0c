// docs/glossary.md and docs/runbook.md keep up with the code: every row
// word, outcome, report mode and report field, and every word of the
// design's tables, has its line in the glossary; every word that is not
// green, every warning the report can carry, every gate code and every
// error code has its entry in the runbook. The words are read from the
// sources themselves (with the TypeScript parser), so a new word without
// its docs fails here. Every link into design.md names a real section.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { OUTCOMES } from '../../src/domain/modes.js'
import { LayoutReport, LegRun, LegState, ResultSchema, RowReport } from '../../src/domain/schemas.js'
import { WITHHELD } from '../../src/report/withheld-reasons.js'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))
const read = (file: string) => fs.readFile(path.join(ROOT, file), 'utf8')

async function parse(file: string): Promise<ts.SourceFile> {
  return ts.createSourceFile(file, await read(file), ts.ScriptTarget.ES2023, true)
}

function walk(node: ts.Node, visit: (n: ts.Node) => void): void {
  visit(node)
  node.forEachChild((child) => walk(child, visit))
}

async function sourceFiles(): Promise<string[]> {
  const entries = await fs.readdir(path.join(ROOT, 'src'), { recursive: true, withFileTypes: true })
  return entries
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => path.relative(ROOT, path.join(e.parentPath, e.name)))
}

/** The words a list item of the glossary defines: its bold or code words before the dash. */
async function glossaryTerms(): Promise<Set<string>> {
  const terms = new Set<string>()
  for (const line of (await read('docs/glossary.md')).split('\n')) {
    if (!line.startsWith('- ')) continue
    const head = line.split(' — ')[0] ?? ''
    for (const m of head.matchAll(/\*\*([^*]+)\*\*|`([^`]+)`/g)) terms.add(m[1] ?? m[2] ?? '')
  }
  return terms
}

/** The headings of a markdown page as GitHub anchors them. */
function anchors(markdown: string): Set<string> {
  const out = new Set<string>()
  for (const m of markdown.matchAll(/^#{1,6} (.+)$/gm)) {
    out.add(
      (m[1] ?? '')
        .toLowerCase()
        .replace(/[^\p{L}\p{N} _-]/gu, '')
        .replace(/ /g, '-'),
    )
  }
  return out
}

/** The members of a string-literal union type alias. */
function unionLiterals(sf: ts.SourceFile, name: string): string[] {
  const out: string[] = []
  walk(sf, (n) => {
    if (ts.isTypeAliasDeclaration(n) && n.name.text === name && ts.isUnionTypeNode(n.type)) {
      for (const t of n.type.types)
        if (ts.isLiteralTypeNode(t) && ts.isStringLiteral(t.literal)) out.push(t.literal.text)
    }
  })
  return out
}

/** Every property name a JSON schema (a TypeBox one) names, at any depth. */
function schemaFields(schema: unknown, out = new Set<string>()): Set<string> {
  if (typeof schema !== 'object' || schema === null) return out
  const s = schema as Record<string, unknown>
  if (typeof s.properties === 'object' && s.properties !== null) {
    for (const [key, sub] of Object.entries(s.properties)) {
      out.add(key)
      schemaFields(sub, out)
    }
  }
  for (const key of ['anyOf', 'oneOf', 'allOf'])
    if (Array.isArray(s[key])) for (const sub of s[key] as unknown[]) schemaFields(sub, out)
  schemaFields(s.items, out)
  if (typeof s.patternProperties === 'object' && s.patternProperties !== null)
    for (const sub of Object.values(s.patternProperties)) schemaFields(sub, out)
  return out
}

/** The words of a table's first column in the design's §1 (and §1.1). */
async function designWords(): Promise<string[]> {
  const design = await read('docs/design.md')
  const words = design.slice(design.indexOf('## 1. Words'), design.indexOf('## 2. On disk'))
  const out: string[] = []
  for (const m of words.matchAll(/^\| ([^|]+) \|/gm)) {
    const cell = (m[1] ?? '').replace(/`/g, '').trim()
    if (cell === 'word' || /^-+$/.test(cell)) continue
    out.push(...cell.split(', '))
  }
  return out
}

/** The fixed parts of a string or template, trimmed of punctuation: what a page quoting it must hold. */
function fixedParts(e: ts.Expression): string[] {
  const tidy = (s: string) => s.replace(/^[\s,:;()]+|[\s,:;()]+$/g, '')
  if (ts.isStringLiteral(e) || ts.isNoSubstitutionTemplateLiteral(e)) return [tidy(e.text)]
  if (ts.isTemplateExpression(e))
    return [e.head.text, ...e.templateSpans.map((s) => s.literal.text)].map(tidy).filter((s) => s.length >= 6)
  return []
}

/**
 * Every warning the report can carry: what is pushed onto `warnings` or
 * put in a `warnings: [...]` literal (a named constant resolved in its
 * file), every constant named `…_WARNING`, the reasons the nested default gives (they follow "nested by
 * default is not in force: "), and what noteDefault records.
 */
async function warningTexts(): Promise<string[]> {
  const out: string[] = []
  for (const file of await sourceFiles()) {
    const sf = await parse(file)
    const constants = new Map<string, ts.Expression>()
    walk(sf, (n) => {
      if (ts.isVariableDeclaration(n) && ts.isIdentifier(n.name) && n.initializer !== undefined)
        constants.set(n.name.text, n.initializer)
    })
    const take = (e: ts.Expression) => {
      const value = ts.isIdentifier(e) ? constants.get(e.text) : e
      if (value !== undefined) out.push(...fixedParts(value))
    }
    walk(sf, (n) => {
      if (ts.isCallExpression(n) && ts.isPropertyAccessExpression(n.expression)) {
        const callee = n.expression
        const on = callee.expression
        if (
          callee.name.text === 'push' &&
          ((ts.isIdentifier(on) && on.text === 'warnings') ||
            (ts.isPropertyAccessExpression(on) && on.name.text === 'warnings'))
        ) {
          n.arguments.forEach(take)
        }
        if (callee.name.text === 'noteDefault') n.arguments.slice(1).forEach(take)
      }
      if (
        ts.isPropertyAssignment(n) &&
        ts.isIdentifier(n.name) &&
        n.name.text === 'warnings' &&
        ts.isArrayLiteralExpression(n.initializer)
      ) {
        n.initializer.elements.forEach(take)
      }
      // A warning kept as a constant is named so: MIXED_WARNING.
      if (
        ts.isVariableDeclaration(n) &&
        ts.isIdentifier(n.name) &&
        /WARNING$/.test(n.name.text) &&
        n.initializer !== undefined
      )
        take(n.initializer)
      if (
        file === 'src/domain/layout-default.ts' &&
        ts.isPropertyAssignment(n) &&
        ts.isIdentifier(n.name) &&
        n.name.text === 'reason'
      )
        take(n.initializer)
    })
  }
  return [...new Set(out)].filter((s) => s !== '')
}

/** Every code the error catalogue can raise: the string literals of AppError's first argument. */
async function errorCodes(): Promise<string[]> {
  const sf = await parse('src/errors.ts')
  const out = new Set<string>()
  walk(sf, (n) => {
    const first =
      ts.isNewExpression(n) && ts.isIdentifier(n.expression) && n.expression.text === 'AppError'
        ? n.arguments?.[0]
        : ts.isCallExpression(n) && n.expression.kind === ts.SyntaxKind.SuperKeyword
          ? n.arguments[0]
          : undefined
    if (first !== undefined) walk(first, (m) => (ts.isStringLiteral(m) ? out.add(m.text) : undefined))
  })
  return [...out]
}

/** Every named code of the isolation gate's checks (an errno's code is covered by one entry). */
async function gateCodes(): Promise<string[]> {
  const sf = await parse('src/infra/isolation.ts')
  const out = new Set<string>()
  walk(sf, (n) => {
    if (
      ts.isPropertyAssignment(n) &&
      ts.isIdentifier(n.name) &&
      n.name.text === 'code' &&
      ts.isStringLiteral(n.initializer)
    )
      out.add(n.initializer.text)
    if (ts.isCallExpression(n) && ts.isIdentifier(n.expression) && n.expression.text === 'fail') {
      const code = n.arguments[1]
      if (code !== undefined && ts.isStringLiteral(code)) out.add(code.text)
    }
  })
  out.delete('ok')
  return [...out]
}

void test('the glossary has a line for every word of the code, the report and the design', async () => {
  const terms = await glossaryTerms()
  const rowWords = unionLiterals(await parse('src/domain/modes.ts'), 'RowLayout')
  assert.ok(rowWords.length >= 6, `row words read from modes.ts: ${rowWords.join(', ')}`)
  const modes = (LayoutReport.properties.mode.anyOf as Array<{ const: string }>).map((s) => s.const)
  // Each part of the report on its own too: the report may refer to them rather than inline them.
  const fields = [LayoutReport, RowReport, LegState, LegRun, ResultSchema].flatMap((schema) => [
    ...schemaFields(schema),
  ])
  const design = await designWords()
  assert.ok(design.length > 20, `words read from design §1: ${design.join(', ')}`)
  const named = ['leg', 'pass', 'mint', 'gate', 'fenced', 'held', 'conflict', 'foreign', 'external', 'aside']
  const missing = [...new Set([...rowWords, ...OUTCOMES, ...modes, ...fields, ...design, ...named])].filter(
    (w) => !terms.has(w),
  )
  assert.deepEqual(missing, [], 'words docs/glossary.md does not define')
})

void test('the runbook has an entry for every word that is not green, every warning, gate code and error code', async () => {
  const runbook = await read('docs/runbook.md')
  const headings = new Set([...runbook.matchAll(/^#{2,4} (.+)$/gm)].map((m) => m[1] ?? ''))
  const rowWords = unionLiterals(await parse('src/domain/modes.ts'), 'RowLayout').filter(
    (w) => w !== 'flat' && w !== 'nested',
  )
  const modes = (LayoutReport.properties.mode.anyOf as Array<{ const: string }>)
    .map((s) => s.const)
    .filter((m) => m !== 'flat' && m !== 'nested')
  const words = [...rowWords, ...WITHHELD, ...modes]
  assert.deepEqual(
    words.filter((w) => !headings.has(w)),
    [],
    'words without a section of docs/runbook.md',
  )

  const warnings = await warningTexts()
  assert.ok(warnings.length >= 8, `warnings read from the code: ${JSON.stringify(warnings)}`)
  assert.deepEqual(
    warnings.filter((w) => !runbook.includes(w)),
    [],
    'warnings (or the reasons they carry) docs/runbook.md does not quote',
  )

  const codes = [...(await errorCodes()), ...(await gateCodes())]
  assert.ok(codes.length > 30, `codes read from the code: ${codes.join(', ')}`)
  assert.deepEqual(
    codes.filter((c) => !runbook.includes(`\`${c}\``)),
    [],
    'codes docs/runbook.md does not explain',
  )
})

void test('every link into design.md, and within the runbook, names a section that exists', async () => {
  const design = anchors(await read('docs/design.md'))
  const runbook = anchors(await read('docs/runbook.md'))
  for (const page of ['docs/glossary.md', 'docs/runbook.md']) {
    const text = await read(page)
    const broken: string[] = []
    for (const m of text.matchAll(/\]\((design\.md|runbook\.md|)#([^)]+)\)/g)) {
      const target =
        m[1] === 'design.md' ? design : m[1] === 'runbook.md' || page === 'docs/runbook.md' ? runbook : undefined
      if (target !== undefined && !target.has(m[2] ?? '')) broken.push(`${m[1]}#${m[2]}`)
    }
    assert.deepEqual(broken, [], `${page}: links to no section`)
  }
})

void test('the checks see a word that is missing', async () => {
  // The glossary's parser and the warning reader are what the tests above
  // rest on: a term it failed to see would pass them on nothing.
  const terms = await glossaryTerms()
  assert.ok(terms.has('fenced') && terms.has('defaultBlocked') && terms.has('label') && !terms.has('no-such-word'))
  const warnings = await warningTexts()
  assert.ok(
    warnings.includes('nested instances share this box with flat ones: they are not isolated until none remains'),
    'the mixed warning, resolved from its constant',
  )
  assert.ok(warnings.includes('start-up recovery is running'), 'a warning built in the agent, from its template')
  assert.ok((await gateCodes()).includes('no-nosymfollow') && (await errorCodes()).includes('mint_failed'))
})
