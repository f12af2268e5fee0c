// Text from outside layoutd made safe to show (design §8): control bytes and
// bidi controls escaped, so a tenant's bytes never drive a terminal.

/** Built from codes, so the pattern's source stays printable. */
const span = (from: number, to: number) => `${String.fromCharCode(from)}-${String.fromCharCode(to)}`

/** Bidi controls, and line and paragraph separators. */
const BIDI = '\\u061c\\u200e\\u200f\\u2028\\u2029\\u202a-\\u202e\\u2066-\\u2069'

const UNSAFE = new RegExp(`[${span(0x00, 0x1f)}${span(0x7f, 0x9f)}${BIDI}]`, 'g')

const UNSAFE_BUT_NEWLINE = new RegExp(`[${span(0x00, 0x09)}${span(0x0b, 0x1f)}${span(0x7f, 0x9f)}${BIDI}]`, 'g')

function escaped(c: string): string {
  const code = c.charCodeAt(0)
  return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u{${code.toString(16)}}`
}

export function printable(text: string): string {
  return text.replace(UNSAFE, escaped)
}

/** Newlines stay. */
export function printableLines(text: string): string {
  return text.replace(UNSAFE_BUT_NEWLINE, escaped)
}
