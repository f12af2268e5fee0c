import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Histogram, Registry } from 'prom-client'
import { HttpHistogram } from '../../src/metrics/http-histogram.js'

const BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120, 600]
const LABELS = ['method', 'route', 'status'] as const

void test('the HTTP histogram writes what a prom-client Histogram of the same name, labels and buckets writes for the same observations', async () => {
  const ours = new Registry()
  const theirs = new Registry()
  const spec = {
    name: 'x_http_request_duration_seconds',
    help: 'HTTP requests served.',
    labelNames: LABELS,
    buckets: BUCKETS,
  }
  const h = new HttpHistogram({ ...spec, registers: [ours] })
  const p = new Histogram({ ...spec, registers: [theirs] })
  const seen = [
    ['GET', '/ready', '200', [0.0004, 0.001, 0.0011, 0.2, 700, 0]],
    ['POST', '/wakes/:host', '409', [0.05, 0.05000001, 3]],
    ['GET', 'unmatched', '404', [600, 120.5]],
  ] as const
  for (const [method, route, status, values] of seen) {
    const key = `${method} ${status} ${route}`
    assert.equal(h.observe(key, 1), false, 'no series before open(): nothing counted')
    h.open(key, { method, route, status })
    for (const v of values) {
      assert.equal(h.observe(key, v), true)
      p.labels({ method, route, status }).observe(v)
    }
  }
  assert.equal(await ours.metrics(), await theirs.metrics())
  // A series opened again by its key is the same series, its counts kept.
  h.open('GET 200 /ready', { method: 'GET', route: '/ready', status: '200' })
  h.observe('GET 200 /ready', 0.002)
  p.labels({ method: 'GET', route: '/ready', status: '200' }).observe(0.002)
  assert.equal(await ours.metrics(), await theirs.metrics())
  assert.match(
    await ours.metrics(),
    /x_http_request_duration_seconds_bucket\{le="0\.005",method="GET",route="\/ready",status="200"\} 5\n/,
  )
})

void test('the HTTP histogram refuses a label it does not have and a value that is not a finite number', () => {
  const h = new HttpHistogram({
    name: 'y_seconds',
    help: 'h',
    labelNames: LABELS,
    buckets: BUCKETS,
    registers: [new Registry()],
  })
  assert.throws(() => h.open('k', { host: 't1.example' }), /no label host/)
  h.open('GET 200 /ready', { method: 'GET', route: '/ready', status: '200' })
  assert.throws(() => h.observe('GET 200 /ready', Number.NaN), /not a finite number/)
  assert.throws(() => h.observe('GET 200 /ready', Infinity), /not a finite number/)
})
