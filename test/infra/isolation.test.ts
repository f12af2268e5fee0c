// The isolation gate: each check on real files (a mountinfo text the test
// writes, a probe verdict file), the first failing check named, and a
// change of answer reported.
import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import {
  Isolation,
  mountIdOf,
  mountsFailure,
  parseMountinfo,
  probeFailure,
  type SelfCheckFs,
} from '../../src/infra/isolation.js'
import { FakeLogger } from '../domain/fakes.js'
import { tmpDir } from '../helpers/tmp.js'

const MOUNTINFO = [
  '22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw',
  '40 22 8:2 / /data/nested rw,nosuid,nodev,nosymfollow shared:2 - ext4 /dev/sda2 rw',
  '41 22 8:3 / /data/with\\040space rw,nosymfollow shared:3 - ext4 /dev/sda3 rw',
  '42 22 8:4 / /data/plain rw,nosuid shared:4 - ext4 /dev/sda4 rw',
].join('\n')

void test('parseMountinfo reads mount points with their escapes and per-mount options', () => {
  const m = parseMountinfo(MOUNTINFO)
  assert.deepEqual(m.get('/data/nested'), ['rw', 'nosuid', 'nodev', 'nosymfollow'])
  assert.ok(m.has('/data/with space'))
})

void test('a later mount on the same point wins', () => {
  const over = `${MOUNTINFO}\n50 40 8:5 / /data/nested rw,nosuid - tmpfs tmpfs rw`
  assert.deepEqual(mountsFailure(over, ['/data/nested']), {
    code: 'no-nosymfollow',
    reason: '/data/nested is mounted without nosymfollow',
  })
})

void test('mountsFailure names the first required mount that does not isolate, with its code', () => {
  assert.equal(mountsFailure(MOUNTINFO, ['/data/nested', '/data/with space']), undefined)
  assert.deepEqual(mountsFailure(MOUNTINFO, ['/data/nested', '/data/plain']), {
    code: 'no-nosymfollow',
    reason: '/data/plain is mounted without nosymfollow',
  })
  assert.deepEqual(mountsFailure(MOUNTINFO, ['/data/other']), {
    code: 'not-a-mount',
    reason: '/data/other is not a mount point',
  })
})

void test('probeFailure wants `ready: true` and reports what it says otherwise, with its code', () => {
  assert.equal(probeFailure('checked: 2026-11-30\nready: true\n'), undefined)
  assert.deepEqual(probeFailure('ready: false\nreason: landlock unavailable\n'), {
    code: 'probe-not-ready',
    reason: 'the probe says ready: false (landlock unavailable)',
  })
  assert.deepEqual(probeFailure('hello'), {
    code: 'probe-unreadable',
    reason: 'the probe verdict has no `ready:` line',
  })
  assert.deepEqual(probeFailure('ready: truthy'), { code: 'probe-not-ready', reason: 'the probe says ready: truthy' })
})

void test('the gate is shut until its first read, opens when every check passes, and reports each change', async (t) => {
  const dir = await tmpDir(t)
  const dataDir = path.join(dir, 'data')
  const mountinfo = path.join(dir, 'mountinfo')
  const probeFile = path.join(dir, 'probe.out')
  const nested = path.join(dataDir, 'nested')
  await fs.writeFile(mountinfo, `40 22 8:2 / ${nested} rw,nosymfollow - ext4 /dev/x rw\n`)
  await fs.writeFile(probeFile, 'ready: false\n')
  const changes: Array<string | null> = []
  const gate = new Isolation(
    { dataDir, nestedMounts: [nested], mountinfo, probeFile, probeEveryMs: 60_000 },
    new FakeLogger(),
    (v) => changes.push(v),
  )

  assert.equal(gate.check(), 'selfcheck: not yet run')
  assert.equal(await gate.refresh({ probe: true }), 'probe: the probe says ready: false')
  await fs.writeFile(probeFile, 'ready: true\n')
  // Without reading the probe the cached verdict stands.
  assert.equal(await gate.refresh({ probe: false }), 'probe: the probe says ready: false')
  assert.equal(await gate.refresh({ probe: true }), null)
  assert.deepEqual(
    gate.report().map((c) => c.ok),
    [true, true, true],
  )

  // A remount without nosymfollow is seen at the next refresh.
  await fs.writeFile(mountinfo, `40 22 8:2 / ${nested} rw - ext4 /dev/x rw\n`)
  assert.equal(await gate.refresh({ probe: false }), `mounts: ${nested} is mounted without nosymfollow`)
  assert.deepEqual(changes, [
    'probe: the probe says ready: false',
    null,
    `mounts: ${nested} is mounted without nosymfollow`,
  ])
  // The self-check leaves nothing behind under D/nested.
  assert.deepEqual(await fs.readdir(nested), [])
})

void test('the self-check refuses a D/nested that is a symlink', async (t) => {
  const dir = await tmpDir(t)
  const dataDir = path.join(dir, 'data')
  await fs.mkdir(path.join(dir, 'elsewhere'), { recursive: true })
  await fs.mkdir(dataDir)
  await fs.symlink(path.join(dir, 'elsewhere'), path.join(dataDir, 'nested'))
  const gate = new Isolation(
    { dataDir, nestedMounts: [], mountinfo: '/nonexistent', probeFile: '/nonexistent', probeEveryMs: 60_000 },
    new FakeLogger(),
  )
  assert.match(
    (await gate.refresh({ probe: true })) ?? '',
    /^selfcheck: .*nested is not a directory \(a symlink is refused\)/,
  )
  assert.deepEqual(await fs.readdir(path.join(dir, 'elsewhere')), [], 'nothing was created through the symlink')
})

void test('the self-check removes the tree a killed self-check left behind', async (t) => {
  const dir = await tmpDir(t)
  const dataDir = path.join(dir, 'data')
  const nested = path.join(dataDir, 'nested')
  await fs.mkdir(path.join(nested, '.selfcheck-123-abcd', 'run'), { recursive: true })
  await fs.mkdir(path.join(nested, 'a.example.com'))
  const gate = new Isolation(
    { dataDir, nestedMounts: [], mountinfo: '/nonexistent', probeFile: '/nonexistent', probeEveryMs: 60_000 },
    new FakeLogger(),
  )
  await gate.refresh({ probe: false })
  assert.equal(gate.report()[0]?.ok, true)
  assert.deepEqual(await fs.readdir(nested), ['a.example.com'])
})

void test('a self-check that fails the same way every time is one change: its code is the verdict, its errno text only the detail', async (t) => {
  const dir = await tmpDir(t)
  const dataDir = path.join(dir, 'data')
  const nested = path.join(dataDir, 'nested')
  let denied = true
  // Root is never refused by chmod; the errno comes from a failing mkdir instead, worded as node words it.
  const selfCheckFs: SelfCheckFs = {
    ...fs,
    mkdir: (async (p: string, opts?: unknown) => {
      if (denied && path.basename(p).startsWith('.selfcheck-')) {
        throw Object.assign(new Error(`EACCES: permission denied, mkdir '${p}'`), {
          code: 'EACCES',
          errno: -13,
          syscall: 'mkdir',
          path: p,
        })
      }
      return fs.mkdir(p, opts as Parameters<typeof fs.mkdir>[1])
    }) as SelfCheckFs['mkdir'],
  }
  const logger = new FakeLogger()
  const changes: Array<string | null> = []
  const gate = new Isolation(
    {
      dataDir,
      nestedMounts: [],
      mountinfo: '/nonexistent',
      probeFile: '/nonexistent',
      probeEveryMs: 60_000,
      selfCheckFs,
    },
    logger,
    (v) => changes.push(v),
  )
  const answers = new Set<string | null>()
  for (let i = 0; i < 5; i++) answers.add(await gate.refresh({ probe: false }))
  const shut = `selfcheck: cannot create, chmod and remove a tree under ${nested} (EACCES)`
  assert.deepEqual([...answers], [shut], 'the same answer every time, naming no probe directory')
  assert.deepEqual(changes, [shut])
  assert.equal(logger.msgs().filter((m) => m.startsWith('layout: isolation gate')).length, 1)
  const self = gate.report()[0]
  assert.equal(self?.code, 'EACCES')
  assert.match(
    self?.detail ?? '',
    /^EACCES: permission denied, mkdir '.*\.selfcheck-/,
    'the errno text stays as the detail',
  )

  denied = false
  // The probe has not been read: the gate now waits on it alone.
  assert.equal(await gate.refresh({ probe: false }), 'probe: not yet run')
  assert.deepEqual(changes, [shut, 'probe: not yet run'], 'the fault lifted is one more change')
})

void test('the answer changes with a check code, not with its words', async (t) => {
  const dir = await tmpDir(t)
  const dataDir = path.join(dir, 'data')
  const probeFile = path.join(dir, 'probe.out')
  await fs.writeFile(probeFile, 'ready: false\nreason: first words\n')
  const changes: Array<string | null> = []
  const gate = new Isolation(
    { dataDir, nestedMounts: [], mountinfo: '/nonexistent', probeFile, probeEveryMs: 60_000 },
    new FakeLogger(),
    (v) => changes.push(v),
  )
  await gate.refresh({ probe: true })
  await fs.writeFile(probeFile, 'ready: false\nreason: other words\n')
  assert.equal(await gate.refresh({ probe: true }), 'probe: the probe says ready: false (other words)')
  assert.equal(gate.report()[2]?.code, 'probe-not-ready')
  await fs.rm(probeFile)
  assert.equal(await gate.refresh({ probe: true }), `probe: cannot read ${probeFile} (ENOENT)`)
  assert.deepEqual(changes, [
    'probe: the probe says ready: false (first words)',
    `probe: cannot read ${probeFile} (ENOENT)`,
  ])
})

void test("a FIFO in the probe verdict's place shuts the gate at once, naming it, instead of holding the refresh", async (t) => {
  const dir = await tmpDir(t)
  const probeFile = path.join(dir, 'probe.out')
  execFileSync('mkfifo', [probeFile])
  const gate = new Isolation(
    { dataDir: path.join(dir, 'data'), nestedMounts: [], mountinfo: '/nonexistent', probeFile, probeEveryMs: 60_000 },
    new FakeLogger(),
  )
  assert.equal(await gate.refresh({ probe: true }), `probe: ${probeFile} is not a regular file`)
  assert.equal(gate.report()[2]?.code, 'not-a-regular-file')
})

void test('mountIdOf names the mount a path lies on: the longest point holding it, the last line for that point', () => {
  const text = `${MOUNTINFO}\n50 40 8:5 / /data/nested rw,nosuid - tmpfs tmpfs rw`
  assert.equal(mountIdOf(text, '/data/nested/a.example.com/data'), '50')
  assert.equal(mountIdOf(text, '/data/nestedx'), '22')
  assert.equal(mountIdOf(text, '/data/apps'), '22')
})

/** Binds dir onto itself with nosymfollow (as root); the test's end unmounts it (a lazy umount above took it). */
function bindNosymfollow(t: TestContext, dir: string): void {
  execFileSync('mount', ['--bind', dir, dir])
  t.after(() => {
    if (spawnSync('mountpoint', ['-q', dir]).status === 0) execFileSync('umount', ['-l', dir])
  })
  execFileSync('mount', ['-o', 'remount,bind,nosymfollow', dir])
}

function realGate(dataDir: string, nestedMounts: string[], probeFile: string): Isolation {
  return new Isolation(
    { dataDir, nestedMounts, mountinfo: '/proc/self/mountinfo', probeFile, probeEveryMs: 60_000 },
    new FakeLogger(),
  )
}

void test('on real mounts: a D/nested mounted on its own shuts the gate (cross-mount), as its rename would fail EXDEV; D itself the nosymfollow mount opens it and the rename works', async (t) => {
  const dir = await fs.realpath(await tmpDir(t))
  const probeFile = path.join(dir, 'probe.out')
  await fs.writeFile(probeFile, 'ready: true\n')

  // The layout the gate asked for before: D/nested its own nosymfollow mount.
  const split = path.join(dir, 'split')
  await fs.mkdir(path.join(split, 'apps', 'a.example.com'), { recursive: true })
  await fs.mkdir(path.join(split, 'nested', 'a.example.com'), { recursive: true })
  bindNosymfollow(t, path.join(split, 'nested'))
  // The fact the check stands for: same filesystem, same st_dev, and still EXDEV.
  const [a, n] = await Promise.all([fs.stat(path.join(split, 'apps')), fs.stat(path.join(split, 'nested'))])
  assert.equal(a.dev, n.dev, 'a bind mount keeps the device number')
  await assert.rejects(
    fs.rename(path.join(split, 'apps', 'a.example.com'), path.join(split, 'nested', 'a.example.com', 'data')),
    { code: 'EXDEV' },
  )
  const shut = realGate(split, [path.join(split, 'nested')], probeFile)
  assert.match((await shut.refresh({ probe: true })) ?? '', /^mounts: .* are on different mounts: rename\(2\) cannot/)
  assert.equal(shut.report()[1]?.code, 'cross-mount')
  // Asked even when no mount is required.
  const none = realGate(split, [], probeFile)
  await none.refresh({ probe: true })
  assert.equal(none.report()[1]?.code, 'cross-mount')

  // The layout the README recommends: D itself the nosymfollow mount.
  const whole = path.join(dir, 'whole')
  await fs.mkdir(path.join(whole, 'apps', 'a.example.com'), { recursive: true })
  await fs.mkdir(path.join(whole, 'nested', 'a.example.com'), { recursive: true })
  bindNosymfollow(t, whole)
  const open = realGate(whole, [whole], probeFile)
  assert.equal(await open.refresh({ probe: true }), null)
  await fs.rename(path.join(whole, 'apps', 'a.example.com'), path.join(whole, 'nested', 'a.example.com', 'data'))
  // A bind mount of D/nested on top of it is seen at the next refresh.
  bindNosymfollow(t, path.join(whole, 'nested'))
  await open.refresh({ probe: false })
  assert.equal(open.report()[1]?.code, 'cross-mount')
})
