// hasShape's memo: a row's shape is judged once per row object and per
// dirs, and a rewritten row (a new object) afresh.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { flatPaths, hasShape, isFlat, isNested, nestedPaths } from '../../src/domain/paths.js'
import type { Route } from '../../src/domain/schemas.js'

void test('hasShape judges each row object once per dirs: a rewritten row and other dirs are judged afresh', () => {
  const d = { dataDir: '/data', runDir: '/run' }
  const host = 'a.example.com'
  const flat: Route = {
    host,
    kind: 'instance',
    hibernate: true,
    ...flatPaths(d, host),
    db: `${flatPaths(d, host).dir}/app.db`,
  }
  assert.equal(isFlat(d, flat), true)
  assert.equal(isNested(d, flat), false)
  assert.equal(isFlat(d, flat), true)
  // The same row judged against other dirs: not flat there.
  assert.equal(hasShape({ dataDir: '/other', runDir: '/run' }, flat, 'flat'), false)
  assert.equal(hasShape(d, flat, 'flat'), true)
  // The row rewritten to nested is a new object, judged on its own paths.
  const nested: Route = { ...flat, ...nestedPaths(d, host), db: `${nestedPaths(d, host).dir}/app.db` }
  assert.equal(isNested(d, nested), true)
  assert.equal(isFlat(d, nested), false)
  // A db outside dir is no shape at all.
  assert.equal(isFlat(d, { ...flat, db: '/elsewhere/app.db' }), false)
  // An invalid host never has a shape, however its paths read.
  const bad: Route = {
    ...flat,
    host: 'A.example.com',
    dir: '/data/apps/A.example.com',
    socket: '/run/A.example.com.sock',
    db: '',
  }
  assert.equal(isFlat(d, bad), false)
})
