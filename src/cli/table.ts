// The CLI's one table: left-aligned columns two spaces apart, each padded to
// its widest cell, no trailing blanks. Every cell is outside text, shown printable.
import { printable } from '../domain/printable.js'

export function formatTable(head: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const shown = rows.map((r) => r.map(printable))
  const widths = head.map((h, i) => Math.max(h.length, ...shown.map((r) => (r[i] ?? '').length)))
  // Padding the last column too changes nothing: the trim takes it off again.
  const line = (r: readonly string[]) =>
    r
      .map((cell, i) => cell.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd()
  return [head, ...shown].map((r) => `${line(r)}\n`).join('')
}
