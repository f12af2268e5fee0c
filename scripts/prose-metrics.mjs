// Measures the prose around the code, the table a newcomer's evening is
// judged by: comment words per code line in src/, comment blocks of 8 or
// more lines, README lines, the largest doc, the commit subjects' median
// length and share over 72 characters, and the src/ comment lines that
// quote a measured figure (which belong in docs/performance.md).
//
//   node scripts/prose-metrics.mjs [RANGE] [--figures] [--files]   RANGE a git revision range (default: HEAD);
//                                            --files lists each src/ file's comment words, code lines and ratio
//   node scripts/prose-metrics.mjs --src DIR [--src DIR]  the source rows alone, for another tree (fastify's lib/)
//
// The method is the one the comparison with fastify, pino and undici was
// made by, so the figures compare:
// - Files: every .ts, .js, .mjs and .cjs file under the tree (not .d.ts),
//   generated ones included.
// - Comments: TypeScript's parser finds them (the comment ranges before
//   and after every token of the syntax tree), so a `//` in a string, a
//   template or a regular expression is no comment. A bare scanner cannot
//   tell where a template's `${…}` ends or where a regular expression
//   starts, takes the code after one for a template and its comments for
//   text, and loses most of them.
// - Comment words: the whitespace-separated pieces of each comment's
//   text, its markers (`//`, `/**`, a JSDoc line's `*`) included, as the
//   compared figures were counted; the row after it leaves the markers and
//   anything without a letter or digit out.
// - Code lines: the lines that hold a token that is not a comment (a
//   template or string over several lines makes each of them code).
// - A block is a run of lines that hold comments and no code.
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import process from 'node:process'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

/** A figure with a unit of time, size or rate, told as measured: a decimal, a range, or a measuring word. */
const FIGURE = /\b\d[\d,]*(?:\.\d+)?(?:\s?[–-]\s?\d[\d,]*(?:\.\d+)?)?\s?(?:ms|µs|us|ns|MB|MiB|KB|KiB|GB|s)\b/
const MEASURED =
  /\d\.\d|\d\s?[–-]\s?\d|\b(?:took|cost|costs|held|measured|timed|profiled?|about|some|p99|median|faster|slower)\b/i

function filesUnder(dir, suffix) {
  return fs
    .readdirSync(path.resolve(ROOT, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && suffix.test(e.name))
    .map((e) => path.join(e.parentPath, e.name))
    .sort()
}

const SOURCE = /\.(?:ts|js|mjs|cjs)$/
const MARKERS = /^\s*(?:\/\/|\/\*+|\*\/|\*)|\*\/\s*$/g

function isJsDoc(node) {
  return node.kind >= ts.SyntaxKind.FirstJSDocNode && node.kind <= ts.SyntaxKind.LastJSDocNode
}

/** Per line of a source file: its comments' raw text, and whether it holds code. */
function linesOf(file, text) {
  const kind = file.endsWith('.ts') ? ts.ScriptKind.TS : ts.ScriptKind.JS
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, kind)
  const lines = text.split('\n').map(() => ({ comment: '', code: false }))
  const lineOf = (pos) => source.getLineAndCharacterOfPosition(pos).line
  const seen = new Set()
  const addComments = (ranges) => {
    for (const r of ranges ?? []) {
      if (seen.has(r.pos)) continue
      seen.add(r.pos)
      const from = lineOf(r.pos)
      text
        .slice(r.pos, r.end)
        .split('\n')
        .forEach((part, i) => (lines[from + i].comment += ` ${part}`))
    }
  }
  const visit = (node) => {
    if (isJsDoc(node)) return
    addComments(ts.getLeadingCommentRanges(text, node.getFullStart()))
    addComments(ts.getTrailingCommentRanges(text, node.getEnd()))
    const children = node.getChildren(source)
    if (children.length === 0 && node.kind !== ts.SyntaxKind.EndOfFileToken)
      for (let l = lineOf(node.getStart(source)); l <= lineOf(node.getEnd()); l++) lines[l].code = true
    children.forEach(visit)
  }
  visit(source)
  return lines
}

function sourceMeasures(dirs) {
  const m = { words: 0, textWords: 0, code: 0, blocks: 0, figures: [], files: [] }
  for (const file of dirs.flatMap((d) => filesUnder(d, SOURCE)).filter((f) => !f.endsWith('.d.ts'))) {
    const lines = linesOf(file, fs.readFileSync(file, 'utf8'))
    const before = { words: m.words, code: m.code }
    let run = 0
    lines.forEach((l, i) => {
      const text = l.comment.replace(MARKERS, '').replace(/\s(?:\/\/|\/\*+|\*\/|\*)(?=\s|$)/g, ' ')
      const commentOnly = l.comment.trim() !== '' && !l.code
      m.words += l.comment.split(/\s+/).filter(Boolean).length
      m.textWords += text.split(/\s+/).filter((w) => /\w/.test(w)).length
      if (l.code) m.code++
      if (FIGURE.test(text) && MEASURED.test(text))
        m.figures.push(`${path.relative(ROOT, file)}:${i + 1}: ${text.trim()}`)
      if (commentOnly) run++
      if (!commentOnly || i === lines.length - 1) {
        if (run >= 8) m.blocks++
        run = 0
      }
    })
    m.files.push({ file: path.relative(ROOT, file), words: m.words - before.words, code: m.code - before.code })
  }
  return m
}

function docMeasures() {
  const docs = ['README.md', ...filesUnder('docs', /\.md$/).map((f) => path.relative(ROOT, f))]
  const sized = docs.map((f) => {
    const text = fs.readFileSync(path.join(ROOT, f), 'utf8')
    return {
      file: f,
      lines: text.split('\n').length - (text.endsWith('\n') ? 1 : 0),
      words: text.split(/\s+/).filter(Boolean).length,
    }
  })
  const largest = sized.reduce((a, b) => (b.lines > a.lines ? b : a))
  return { readme: sized[0].lines, largest }
}

function subjectMeasures(range) {
  const subjects = execFileSync('git', ['log', '--format=%s', range], { cwd: ROOT, encoding: 'utf8' })
    .split('\n')
    .filter((s) => s !== '')
  const lengths = subjects.map((s) => [...s].length).sort((a, b) => a - b)
  const mid = Math.floor(lengths.length / 2)
  const median = lengths.length === 0 ? 0 : lengths.length % 2 ? lengths[mid] : (lengths[mid - 1] + lengths[mid]) / 2
  const over = lengths.filter((n) => n > 72).length
  return { count: subjects.length, median, over, share: lengths.length === 0 ? 0 : over / lengths.length }
}

function sourceRows(src) {
  return [
    ['comment words per code line (`src/`)', (src.words / src.code).toFixed(2)],
    ['the same, markers and bare punctuation not counted', (src.textWords / src.code).toFixed(2)],
    ['comment blocks of 8+ lines (`src/`)', String(src.blocks)],
  ]
}

function main(argv) {
  const dirs = argv.flatMap((a, i) => (argv[i - 1] === '--src' ? [a] : []))
  const range = argv.find((a, i) => !a.startsWith('--') && argv[i - 1] !== '--src') ?? 'HEAD'
  const src = sourceMeasures(dirs.length > 0 ? dirs : ['src'])
  let rows = sourceRows(src)
  if (dirs.length === 0) {
    const docs = docMeasures()
    const git = subjectMeasures(range)
    rows = [
      ...rows,
      ['README lines', String(docs.readme)],
      ['the largest doc', `${docs.largest.file}, ${docs.largest.lines} lines, ${docs.largest.words} words`],
      [
        `commit subjects (${range}, ${git.count}): median length, share over 72 chars`,
        `${git.median}, ${(git.share * 100).toFixed(0)} % (${git.over})`,
      ],
      ['`src/` comment lines quoting a measured ms/MB/s figure', String(src.figures.length)],
    ]
  }
  process.stdout.write(['| measure | value |', '|---|---|', ...rows.map(([k, v]) => `| ${k} | ${v} |`)].join('\n'))
  process.stdout.write('\n')
  if (argv.includes('--figures')) for (const f of src.figures) process.stdout.write(`${f}\n`)
  if (argv.includes('--files'))
    for (const f of src.files.sort((a, b) => b.words - a.words))
      process.stdout.write(`${f.words}\t${f.code}\t${(f.words / Math.max(1, f.code)).toFixed(2)}\t${f.file}\n`)
}

main(process.argv.slice(2))
