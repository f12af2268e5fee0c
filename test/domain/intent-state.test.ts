import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { IntentState, type IntentSnapshot } from '../../src/domain/intent-state.js'

void describe('lastLayoutIntent / lastLayoutDefault', () => {
  void it('are none and not-in-play before any read', () => {
    const s = new IntentState()
    assert.equal(s.lastIntent(), 'none')
    assert.deepEqual(s.lastDefault(), { applied: false, blocked: '', blockedBy: '' })
    assert.equal(s.version, 0)
  })

  void it('hand out copies: a caller cannot change what is held', () => {
    const s = new IntentState()
    s.noteDefault('none', 'why', 'gate')
    s.lastDefault().blocked = 'changed'
    assert.equal(s.lastDefault().blocked, 'why')
  })
})

void describe('noteLayoutIntent', () => {
  void it('records the mode and takes the default out of play', () => {
    const s = new IntentState()
    s.noteDefault('nested', '', '')
    s.noteIntent('flat')
    assert.equal(s.lastIntent(), 'flat')
    assert.deepEqual(s.lastDefault(), { applied: false, blocked: '', blockedBy: '' })
  })

  void it('keeps why an unreadable intent is unreadable, until a read succeeds', () => {
    const s = new IntentState()
    s.noteIntent('unreadable', 'etcd: connection refused')
    assert.equal(s.lastIntent(), 'unreadable')
    assert.equal(s.unreadableWhy(), 'etcd: connection refused')
    s.noteIntent('nested', 'ignored for a readable mode')
    assert.equal(s.lastIntent(), 'nested')
    assert.equal(s.unreadableWhy(), '')
  })
})

void describe('noteLayoutDefault', () => {
  void it('nested: the intent is nested, by default', () => {
    const s = new IntentState()
    s.noteDefault('nested', '', '')
    assert.equal(s.lastIntent(), 'nested')
    assert.deepEqual(s.lastDefault(), { applied: true, blocked: '', blockedBy: '' })
  })

  void it('none: the intent is none, with the reason the default is blocked', () => {
    const s = new IntentState()
    s.noteIntent('unreadable', 'x')
    s.noteDefault('none', 'isolation not ready: probe: not yet run', 'gate')
    assert.equal(s.lastIntent(), 'none')
    assert.equal(s.unreadableWhy(), '')
    assert.deepEqual(s.lastDefault(), {
      applied: false,
      blocked: 'isolation not ready: probe: not yet run',
      blockedBy: 'gate',
    })
  })
})

void describe('IntentState.version', () => {
  void it('moves on every change and not on a note that changes nothing', () => {
    const s = new IntentState()
    s.noteIntent('nested')
    assert.equal(s.version, 1)
    s.noteIntent('nested')
    assert.equal(s.version, 1)
    s.noteDefault('nested', '', '')
    assert.equal(s.version, 2, 'nested by default differs from a recorded nested')
    s.noteDefault('none', 'a', 'gate')
    s.noteDefault('none', 'b', 'gate')
    assert.equal(s.version, 4)
  })

  void it('tells listeners of each change until they stop listening', () => {
    const s = new IntentState()
    const seen: IntentSnapshot[] = []
    const stop = s.onChange((snap) => seen.push(snap))
    s.noteIntent('flat')
    s.noteIntent('flat')
    s.noteIntent('unreadable', 'timeout')
    stop()
    s.noteIntent('nested')
    assert.deepEqual(seen, [
      { intent: 'flat', why: '', default: { applied: false, blocked: '', blockedBy: '' }, version: 1 },
      { intent: 'unreadable', why: 'timeout', default: { applied: false, blocked: '', blockedBy: '' }, version: 2 },
    ])
  })
})
