// Measures the prose around the code, the table a newcomer's evening is
// judged by: comment words per code line in src/, comment blocks of 8 or
// more lines, README lines, the largest doc, the commit subjects' median
// length and share over 72 characters, and the src/ comment lines that
// quote a measured figure (which belong in docs/performance.md).
//
//   node scripts/prose-metrics.mjs [RANGE]    RANGE a git revision range (default: every commit of HEAD)
//
// Comments are found by TypeScript's own scanner, so a `//` inside a string
// is no comment. A code line is a line holding any token that is not a
// comment. A block is a run of lines that hold comments and no code.
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
    .readdirSync(path.join(ROOT, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith(suffix))
    .map((e) => path.join(e.parentPath, e.name))
    .sort()
}

/** Per line of a source file: its comment text, and whether it holds code. */
function linesOf(text) {
  const lines = text.split('\n').map(() => ({ comment: '', code: false }))
  const lineAt = (pos) => text.slice(0, pos).split('\n').length - 1
  const scanner = ts.createScanner(ts.ScriptTarget.Latest, false, ts.LanguageVariant.Standard, text)
  for (let kind = scanner.scan(); kind !== ts.SyntaxKind.EndOfFileToken; kind = scanner.scan()) {
    const from = lineAt(scanner.getTokenStart())
    if (kind === ts.SyntaxKind.SingleLineCommentTrivia || kind === ts.SyntaxKind.MultiLineCommentTrivia) {
      scanner
        .getTokenText()
        .split('\n')
        .forEach(
          (part, i) => (lines[from + i].comment += ` ${part.replace(/^\s*(?:\/\/|\/\*+|\*\/|\*)|\*\/\s*$/g, '')}`),
        )
    } else if (kind !== ts.SyntaxKind.WhitespaceTrivia && kind !== ts.SyntaxKind.NewLineTrivia) {
      const to = lineAt(scanner.getTokenEnd())
      for (let l = from; l <= to; l++) lines[l].code = true
    }
  }
  return lines
}

function sourceMeasures() {
  let words = 0
  let code = 0
  let blocks = 0
  const figures = []
  for (const file of filesUnder('src', '.ts')) {
    const lines = linesOf(fs.readFileSync(file, 'utf8'))
    let run = 0
    lines.forEach((l, i) => {
      const commentOnly = l.comment.trim() !== '' && !l.code
      words += l.comment.split(/\s+/).filter((w) => /\w/.test(w)).length
      if (l.code) code++
      if (FIGURE.test(l.comment) && MEASURED.test(l.comment))
        figures.push(`${path.relative(ROOT, file)}:${i + 1}: ${l.comment.trim()}`)
      if (commentOnly) run++
      if (!commentOnly || i === lines.length - 1) {
        if (run >= 8) blocks++
        run = 0
      }
    })
  }
  return { words, code, blocks, figures }
}

function docMeasures() {
  const docs = ['README.md', ...filesUnder('docs', '.md').map((f) => path.relative(ROOT, f))]
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

function main(argv) {
  const range = argv[0] ?? 'HEAD'
  const src = sourceMeasures()
  const docs = docMeasures()
  const git = subjectMeasures(range)
  const rows = [
    ['comment words per code line (`src/`)', (src.words / src.code).toFixed(2)],
    ['comment blocks of 8+ lines (`src/`)', String(src.blocks)],
    ['README lines', String(docs.readme)],
    ['the largest doc', `${docs.largest.file}, ${docs.largest.lines} lines, ${docs.largest.words} words`],
    [
      `commit subjects (${range}, ${git.count}): median length, share over 72 chars`,
      `${git.median}, ${(git.share * 100).toFixed(0)} % (${git.over})`,
    ],
    ['`src/` comment lines quoting a measured ms/MB/s figure', String(src.figures.length)],
  ]
  process.stdout.write(['| measure | layoutd |', '|---|---|', ...rows.map(([k, v]) => `| ${k} | ${v} |`)].join('\n'))
  process.stdout.write('\n')
  if (argv.includes('--figures')) for (const f of src.figures) process.stdout.write(`${f}\n`)
}

main(
  process.argv
    .slice(2)
    .filter((a) => a !== '--figures')
    .concat(process.argv.includes('--figures') ? ['--figures'] : []),
)
