// The parts src/metrics/prom-client.ts requires file by file are the very
// classes and function prom-client's index exports: a release that moves
// them fails here, not in a scrape.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import * as index from 'prom-client'
import * as parts from '../../src/metrics/prom-client.js'

void test("each part is the one prom-client's index exports", () => {
  assert.equal(parts.Registry, index.Registry)
  assert.equal(parts.Counter, index.Counter)
  assert.equal(parts.Gauge, index.Gauge)
  assert.equal(parts.Histogram, index.Histogram)
  assert.equal(parts.collectDefaultMetrics, index.collectDefaultMetrics)
})
