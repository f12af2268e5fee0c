// The CLI's one table: left-aligned columns two spaces apart, each padded to
// its widest cell, no trailing blanks. `status` and `routes list` print with it.

export function formatTable(head: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  // Padding the last column too changes nothing: the trim takes it off again.
  const line = (r: readonly string[]) =>
    r
      .map((cell, i) => cell.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd()
  return [head, ...rows].map((r) => `${line(r)}\n`).join('')
}
