// The console's script on a page left open: its relative times are drawn
// again from their absolute stamps as time passes (an idle tab never shows
// a stale `50s ago`), and an agent that stops answering is said at the top
// with since when. The script runs in a context of its own, with a stand-in
// document, clock, timers and fetch.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import { test } from 'node:test'
import vm from 'node:vm'

const SCRIPT = new URL('../../src/routes/console-page/console.js', import.meta.url)

class El {
  id = ''
  className = ''
  textContent = ''
  readonly attrs = new Map<string, string>()
  readonly placedBefore: El[] = []
  removed = false
  getAttribute(name: string): string | null {
    return this.attrs.get(name) ?? null
  }
  setAttribute(name: string, value: string): void {
    this.attrs.set(name, value)
  }
  before(el: El): void {
    this.placedBefore.push(el)
    page.byId.set(el.id, el)
  }
  remove(): void {
    this.removed = true
    page.byId.delete(this.id)
  }
}

const page = { byId: new Map<string, El>() }

void test('the times are drawn again from their stamps, and a silent agent is said at the top', async () => {
  let clock = Date.parse('2026-12-03T12:00:00.000Z')
  const time = new El()
  time.setAttribute('datetime', new Date(clock - 50_000).toISOString())
  time.textContent = '50s ago'
  const live = new El()
  page.byId.set('live', live)
  const timeouts: Array<() => void> = []
  const intervals: Array<() => void> = []
  let answering = true
  class Clock extends Date {
    constructor(...args: [] | [number | string]) {
      if (args.length === 0) super(clock)
      else super(args[0])
    }
    static override now(): number {
      return clock
    }
  }
  const context = vm.createContext({
    Date: Clock,
    document: {
      body: { dataset: { etag: '"v1"' } },
      hidden: false,
      title: '',
      querySelectorAll: (selector: string) => (selector === 'time[datetime]' ? [time] : []),
      getElementById: (id: string) => page.byId.get(id) ?? null,
      createElement: () => new El(),
    },
    location: { href: 'http://agent/' },
    DOMParser: class {},
    fetch: () =>
      answering
        ? Promise.resolve({ status: 304, body: { cancel: () => Promise.resolve() } })
        : Promise.reject(new Error('gone')),
    setTimeout: (fn: () => void) => timeouts.push(fn),
    setInterval: (fn: () => void) => intervals.push(fn),
  })
  vm.runInContext(await fs.readFile(SCRIPT, 'utf8'), context)
  const tick = async () => {
    const fn = timeouts.shift()
    assert.ok(fn !== undefined, 'a tick is scheduled')
    fn()
    // The tick's fetch settles in a later turn.
    await new Promise((resolve) => setImmediate(resolve))
    await new Promise((resolve) => setImmediate(resolve))
  }
  await tick()
  assert.equal(page.byId.get('agent-gone'), undefined, 'nothing said while the agent answers')
  clock += 32_000
  for (const fn of intervals) fn()
  assert.equal(time.textContent, '1m ago', 'the relative time moved on with the clock')
  answering = false
  await tick()
  const gone = page.byId.get('agent-gone')
  assert.ok(gone !== undefined, 'the agent not answering is said')
  assert.equal(gone.className, 'gone')
  assert.match(gone.textContent, /^The agent is not answering since 2026-12-03T12:00:32\.000Z \(0s\)/)
  clock += 20_000
  for (const fn of intervals) fn()
  assert.match(gone.textContent, /\(20s\): what follows is its last report\.$/)
  answering = true
  await tick()
  assert.equal(gone.removed, true, 'the notice goes once the agent answers again')
})
