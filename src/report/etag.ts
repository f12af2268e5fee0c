// The report's ETag (design §6.2): the report's version, quoted, and the If-None-Match test.

// Strong: one version is one body, so a poll gets 304 with nothing built or hashed.
export function etagOf(tag: string): string {
  return `"${tag}"`
}

// If-None-Match compares weakly (RFC 9110 §13.1.2), so a W/ prefix still matches.
export function etagMatches(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false
  // A console polling sends back the one tag it was given.
  if (header === etag) return true
  if (header.trim() === '*') return true
  return header.split(',').some((t) => t.trim().replace(/^W\//, '') === etag)
}
