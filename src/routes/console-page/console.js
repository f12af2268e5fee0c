/* global document, fetch, location, DOMParser, setTimeout */
// Keeps the console current while it is open: every few seconds it asks
// GET /layout/status whether the report changed since the page was drawn
// (If-None-Match with the report's ETag, answered 304 while it did not),
// and only then fetches this page again and swaps its live part in. The
// search form is left alone, so nothing typed is lost. Without this script
// the page is the same, and a reload shows the latest.
;(() => {
  const EVERY_MS = 2000
  let etag = document.body.dataset.etag ?? ''

  async function redraw() {
    const page = await fetch(location.href, { cache: 'no-store' })
    if (!page.ok) return
    const next = new DOMParser().parseFromString(await page.text(), 'text/html')
    const live = next.getElementById('live')
    const here = document.getElementById('live')
    if (live === null || here === null) return
    here.replaceWith(document.adoptNode(live))
    etag = next.body.dataset.etag ?? ''
    document.title = next.title
  }

  async function tick() {
    try {
      if (!document.hidden) {
        const res = await fetch('/layout/status', { headers: { 'if-none-match': etag }, cache: 'no-store' })
        await res.body?.cancel()
        if (res.status === 200) await redraw()
      }
    } catch {
      // The agent is away for now (restarting): the next tick asks again.
    }
    setTimeout(() => void tick(), EVERY_MS)
  }

  setTimeout(() => void tick(), EVERY_MS)
})()
