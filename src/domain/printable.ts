// Text from outside layoutd (a file name, a record, a reason) made safe to
// show (design §8): every control byte and every bidi override is escaped,
// so a tenant's or a store's bytes never move a terminal's cursor, recolour
// it, hide what follows, or reorder a line. The CLI and the console both
// show outside text through it.

/** A character class's range from one code to another, built from the codes (the pattern's source stays printable). */
const span = (from: number, to: number) => `${String.fromCharCode(from)}-${String.fromCharCode(to)}`

/** The marks, bidi embeddings, overrides and isolates, and the line and paragraph separators. */
const BIDI = '\\u061c\\u200e\\u200f\\u2028\\u2029\\u202a-\\u202e\\u2066-\\u2069'

/** What is escaped: C0 (U+0000–U+001F), DEL and C1 (U+007F–U+009F), and BIDI. */
const UNSAFE = new RegExp(`[${span(0x00, 0x1f)}${span(0x7f, 0x9f)}${BIDI}]`, 'g')

/** The same, keeping newlines: a message of several lines stays several lines. */
const UNSAFE_BUT_NEWLINE = new RegExp(`[${span(0x00, 0x09)}${span(0x0b, 0x1f)}${span(0x7f, 0x9f)}${BIDI}]`, 'g')

function escaped(c: string): string {
  const code = c.charCodeAt(0)
  return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u{${code.toString(16)}}`
}

/** Outside text as it may be shown: `a\x00b`, `\x1b[31m`, `\u{202e}`; everything else as it is. */
export function printable(text: string): string {
  return text.replace(UNSAFE, escaped)
}

/** The same for text of several lines (a message, a stack): its newlines stay, every other control byte is escaped. */
export function printableLines(text: string): string {
  return text.replace(UNSAFE_BUT_NEWLINE, escaped)
}
