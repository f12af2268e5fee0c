// The allocator's trim gives back to the kernel what glibc held free after
// the buffers that used it were collected, and says it did.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import v8 from 'node:v8'
import vm from 'node:vm'
import { allocatorTrimmable, trimAllocator } from '../../src/infra/allocator-trim.js'

const MB = 2 ** 20
const BUFFERS = 20_000
const SIZE = 8192

void test("after many small buffers are collected, the trim gives most of glibc's free pages back", async () => {
  assert.ok(allocatorTrimmable, 'the addon (build/Release/walk.node) carries trimAllocator')
  v8.setFlagsFromString('--expose-gc')
  const gc = vm.runInNewContext('gc') as () => void
  // Buffers under glibc's mmap threshold come from its arenas; one kept in
  // every thousand holds the arena's top, so free() alone cannot shrink it.
  let made: Buffer[] | undefined = Array.from({ length: BUFFERS }, () => Buffer.allocUnsafeSlow(SIZE))
  const kept = made.filter((_, i) => i % 1000 === 999)
  made = undefined
  gc()
  gc()
  const before = process.memoryUsage().rss
  assert.equal(await trimAllocator(), true)
  const after = process.memoryUsage().rss
  const freed = (BUFFERS * SIZE) / MB
  assert.ok(
    before - after > freed / 2,
    `RSS ${(before / MB).toFixed(1)} → ${(after / MB).toFixed(1)} MB: under half of the ${freed} MB freed given back`,
  )
  assert.equal(kept.length, BUFFERS / 1000)
})
