import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { defaultLayoutIntent, layoutDefault, nestedByDefault } from '../../src/domain/layout-default.js'
import { FakeGate } from './fakes.js'

void describe('layoutDefault', () => {
  void it('reads unset and nested as nested', () => {
    assert.deepEqual(layoutDefault(''), { mode: 'nested', invalid: '' })
    assert.deepEqual(layoutDefault('   '), { mode: 'nested', invalid: '' })
    assert.deepEqual(layoutDefault('nested'), { mode: 'nested', invalid: '' })
    assert.deepEqual(layoutDefault(' Nested\n'), { mode: 'nested', invalid: '' })
  })

  void it('reads flat as flat', () => {
    assert.deepEqual(layoutDefault('flat'), { mode: 'flat', invalid: '' })
    assert.deepEqual(layoutDefault(' FLAT '), { mode: 'flat', invalid: '' })
  })

  void it('reads anything else as flat, returning the value as invalid', () => {
    assert.deepEqual(layoutDefault('nestd'), { mode: 'flat', invalid: 'nestd' })
    assert.deepEqual(layoutDefault(' Yes '), { mode: 'flat', invalid: 'yes' })
  })

  void it('counts as nested by default only when nested and valid', () => {
    assert.equal(nestedByDefault(''), true)
    assert.equal(nestedByDefault('flat'), false)
    assert.equal(nestedByDefault('bogus'), false)
  })
})

void describe('defaultLayoutIntent', () => {
  const ready = { layoutDefault: '', build: 'v0.25.0', gate: new FakeGate(null) }

  void it('is nested on a box that is ready', () => {
    assert.deepEqual(defaultLayoutIntent(ready), { mode: 'nested', reason: '', by: '' })
  })

  void it('is none, with the reason, for an invalid value', () => {
    assert.deepEqual(defaultLayoutIntent({ ...ready, layoutDefault: 'Nestd' }), {
      mode: 'none',
      reason: 'CARLOS_LAYOUT_DEFAULT=nestd is not nested or flat; staying flat',
      by: 'default_invalid',
    })
  })

  void it('is none without a reason for the flat opt-out, and asks nothing else', () => {
    const gate = new FakeGate('not asked')
    assert.deepEqual(defaultLayoutIntent({ ...ready, layoutDefault: 'flat', build: 'v0.1.0', gate }), {
      mode: 'none',
      reason: '',
      by: '',
    })
    assert.equal(gate.asked, 0)
  })

  void it('is none below the floor, naming the build and the floor', () => {
    assert.deepEqual(defaultLayoutIntent({ ...ready, build: 'v0.24.9' }), {
      mode: 'none',
      reason: 'this box runs v0.24.9, below v0.25.0, the first release on which nested instances wake',
      by: 'floor',
    })
  })

  void it('passes a build it cannot place', () => {
    for (const build of ['', 'dev', '3f9c2ab']) {
      assert.deepEqual(defaultLayoutIntent({ ...ready, build }), { mode: 'nested', reason: '', by: '' }, build)
    }
  })

  void it('is none when no activator is armed', () => {
    assert.deepEqual(defaultLayoutIntent({ ...ready, gate: null }), {
      mode: 'none',
      reason: 'no activator is armed on this box, so nothing could wake nested',
      by: 'no_activator',
    })
  })

  void it("is none while the isolation gate says no, with the gate's reason", () => {
    assert.deepEqual(defaultLayoutIntent({ ...ready, gate: new FakeGate('probe: not yet run') }), {
      mode: 'none',
      reason: 'isolation not ready: probe: not yet run',
      by: 'gate',
    })
  })

  void it('checks in order: value, floor, activator, gate', () => {
    const shut = new FakeGate('mounts: /data/nested lacks nosymfollow')
    assert.match(
      defaultLayoutIntent({ layoutDefault: 'x', build: 'v0.1.0', gate: null }).reason,
      /^CARLOS_LAYOUT_DEFAULT=x/,
    )
    assert.match(
      defaultLayoutIntent({ layoutDefault: '', build: 'v0.1.0', gate: null }).reason,
      /^this box runs v0\.1\.0/,
    )
    assert.match(
      defaultLayoutIntent({ layoutDefault: '', build: 'v0.1.0', gate: shut }).reason,
      /^this box runs v0\.1\.0/,
    )
    assert.equal(defaultLayoutIntent({ layoutDefault: '', build: 'v0.1.0', gate: shut }).by, 'floor', 'not the gate')
    assert.equal(shut.asked, 0)
  })
})
