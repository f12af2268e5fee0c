import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { belowFloor, LAYOUT_FLOOR, parseRelease, placeableBuild } from '../../src/domain/release.js'

void describe('release.LayoutFloor', () => {
  void it('is v0.25.0, the first release on which nested instances wake', () => {
    assert.equal(LAYOUT_FLOOR, 'v0.25.0')
  })
})

void describe('release.BelowFloor', () => {
  void it('places a release number below the floor, with or without the v', () => {
    assert.equal(belowFloor('v0.24.9', 'v0.25.0'), true)
    assert.equal(belowFloor('0.24.9', 'v0.25.0'), true)
    assert.equal(belowFloor('v0.9.99', 'v0.25.0'), true)
  })

  void it('passes the floor itself and anything above it', () => {
    assert.equal(belowFloor('v0.25.0', 'v0.25.0'), false)
    assert.equal(belowFloor('0.25.1', 'v0.25.0'), false)
    assert.equal(belowFloor('v0.26.0', 'v0.25.0'), false)
    assert.equal(belowFloor('v1.0.0', 'v0.25.0'), false)
  })

  void it('orders major before minor before patch, numerically', () => {
    assert.equal(belowFloor('v0.99.99', 'v1.0.0'), true)
    assert.equal(belowFloor('v1.0.0', 'v0.99.99'), false)
    assert.equal(belowFloor('v0.25.10', 'v0.25.9'), false)
  })

  void it('passes a build it cannot place: unset, dev, a commit id, a partial number', () => {
    for (const b of [
      '',
      '  ',
      'dev',
      '3f9c2ab',
      '3f9c2ab1e0d94c5f8a7b6e5d4c3b2a1f0e9d8c7b',
      'v0.24',
      'v0.24.9.1',
      'release-0.24.9',
      'v0.024.9',
    ]) {
      assert.equal(belowFloor(b, 'v0.25.0'), false, `build ${JSON.stringify(b)}`)
    }
  })

  void it('compares a pre-release by its version: a candidate of the floor is at it, one of an older release is below', () => {
    assert.equal(belowFloor('v0.25.0-rc.1', 'v0.25.0'), false)
    assert.equal(belowFloor('v0.24.9-rc.1', 'v0.25.0'), true)
  })

  void it('ignores build metadata', () => {
    assert.equal(belowFloor('v0.24.9+build.7', 'v0.25.0'), true)
    assert.equal(belowFloor('0.25.0-rc.2+sha.3f9c2ab', 'v0.25.0'), false)
  })

  void it('trims the stamped build', () => {
    assert.equal(belowFloor(' v0.24.9\n', 'v0.25.0'), true)
  })

  void it('defaults the floor to the layout floor', () => {
    assert.equal(belowFloor('v0.24.9'), true)
    assert.equal(belowFloor('v0.25.0'), false)
  })

  void it('refuses a floor that is not a release number', () => {
    assert.throws(() => belowFloor('v0.24.9', 'dev'), /layout floor "dev" is not a release number/)
  })

  void it('parses the parts of a release', () => {
    assert.deepEqual(parseRelease('v1.2.3-rc.4+x'), { major: 1, minor: 2, patch: 3, pre: 'rc.4' })
    assert.equal(parseRelease('v99999999999999999999.0.0'), null)
  })

  void it('places unset, a release, a commit id and dev; nothing else', () => {
    for (const build of ['', 'dev', 'v0.25.0', '0.24.9', 'v0.25.0-rc.1', 'deadbee', 'a'.repeat(40)])
      assert.equal(placeableBuild(build), true, build)
    for (const build of ['v0.25', '2024.06.01', 'release-0.25', 'latest', 'abc12', 'DEADBEEF'])
      assert.equal(placeableBuild(build), false, build)
  })
})
