/* global document, fetch, location, DOMParser, setTimeout, setInterval */
// Keeps the console current while it is open: it asks GET /layout/status
// with If-None-Match every few seconds, and only on a new report swaps the
// live part in, leaving the search form alone. Relative times are redrawn
// each second from their datetime, so an idle tab never shows a stale one.
;(() => {
  const EVERY_MS = 2000
  let etag = document.body.dataset.etag ?? ''
  /** When the agent first failed to answer (ms since the epoch); 0 while it answers. */
  let goneSince = 0

  /** As the server draws them (console-view.ts). */
  function spanOf(s) {
    if (s < 60) return `${s}s`
    if (s < 3600) return `${Math.floor(s / 60)}m`
    if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`
    return `${Math.floor(s / 86400)}d`
  }

  function relative(iso, now) {
    const t = Date.parse(iso)
    if (Number.isNaN(t)) return iso
    const s = Math.round(Math.abs(t - now) / 1000)
    if (s === 0) return 'just now'
    return t > now ? `in ${spanOf(s)}` : `${spanOf(s)} ago`
  }

  function retime() {
    const now = Date.now()
    for (const el of document.querySelectorAll('time[datetime]')) {
      const text = relative(el.getAttribute('datetime') ?? '', now)
      if (el.textContent !== text) el.textContent = text
    }
    const gone = document.getElementById('agent-gone')
    if (goneSince === 0) {
      if (gone !== null) gone.remove()
      return
    }
    const text =
      `The agent is not answering since ${new Date(goneSince).toISOString()} ` +
      `(${spanOf(Math.round((now - goneSince) / 1000))}): what follows is its last report.`
    if (gone !== null) {
      if (gone.textContent !== text) gone.textContent = text
      return
    }
    const p = document.createElement('p')
    p.id = 'agent-gone'
    p.className = 'gone'
    p.setAttribute('role', 'alert')
    p.textContent = text
    document.getElementById('live')?.before(p)
  }

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
        if (res.status !== 200 && res.status !== 304) throw new Error(`status ${res.status}`)
        goneSince = 0
        if (res.status === 200) await redraw()
      }
    } catch {
      // Said at the top until the agent answers again.
      if (goneSince === 0) goneSince = Date.now()
    }
    retime()
    setTimeout(() => void tick(), EVERY_MS)
  }

  setInterval(retime, 1000)
  setTimeout(() => void tick(), EVERY_MS)
})()
