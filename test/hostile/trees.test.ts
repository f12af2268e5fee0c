// Tenant trees that are odd, or that change while their move is under way:
// FIFOs, sockets and device nodes, hard links, the dir swapped for a
// symlink, files appearing and disappearing, modes changing, things
// appearing at the destination. The pass's failpoint hook is where each
// case acts, at the step it names. A move that goes ahead carries the tree
// exactly (its fingerprint at the nested dir is the one it had flat); a move
// that is refused, fails or is held says why, and leaves the files where
// they were and the directory outside the data root untouched.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { flatPaths, nestedPaths, nestedRoot } from '../../src/domain/paths.js'
import type { Result } from '../../src/domain/modes.js'
import { diffFingerprints, fingerprint, treeLines, type Fingerprint } from '../helpers/fingerprint.js'
import { tmpDir } from '../helpers/tmp.js'
import { harness, type Harness } from '../infra/pass/pass-harness.js'

const HOST = 'a.example.com'

interface Case {
  h: Harness
  outside: string
  flat: string
  nested: string
  /** The data root, the registry and the outside dir before the move. */
  before: Fingerprint
  /** The tenant's tree before the move. */
  tree: string[]
}

/**
 * A pass with one flat tenant (and a neighbour), whose failpoint hook runs
 * act once at step; answers the case, fingerprinted just before the move.
 */
async function moveCase(
  t: TestContext,
  step: string,
  act: (c: Case) => void,
  prepare?: (c: Case) => void,
): Promise<{ c: Case; result: Result | undefined }> {
  const outside = await tmpDir(t, 'layoutd-hostile-outside-')
  fs.writeFileSync(path.join(outside, 'secret.txt'), "not the tenant's")
  // Set once the case is fingerprinted: the harness's own steps before that do not act.
  const hook: { fire?: () => void } = {}
  const h = await harness(t, { failpoint: (s) => s === step && hook.fire?.() })
  h.addFlat(HOST, 1)
  h.addFlat('b.example.com', 2)
  const c: Case = {
    h,
    outside,
    flat: flatPaths(h.dirs, HOST).dir,
    nested: nestedPaths(h.dirs, HOST).dir,
    before: undefined as unknown as Fingerprint,
    tree: [],
  }
  prepare?.(c)
  c.before = fingerprint(h.dirs.dataDir, { also: { outside } })
  c.tree = treeLines(c.flat)
  let fired = false
  hook.fire = () => {
    if (fired) return
    fired = true
    act(c)
  }
  // b is awake, inside its grace: its files are the neighbour's and do not move.
  h.claims.awake.add('b.example.com')
  const results = await h.converge('nested')
  assert.ok(fired, `the failpoint ${step} was reached`)
  return { c, result: results.find((r) => r.host === HOST) }
}

/** The lines of after that are not in before, and the reverse, outside the registry's counter. */
function changed(c: Case): { added: string[]; removed: string[] } {
  const d = diffFingerprints(c.before, fingerprint(c.h.dirs.dataDir, { also: { outside: c.outside } }))
  const keep = (l: string) => !l.startsWith('meta ')
  return { added: d.added.filter(keep), removed: d.removed.filter(keep) }
}

/** The move did not happen: the files are where they were, the row too, and no journal is left. */
function stayed(c: Case): void {
  assert.deepEqual(treeLines(c.flat), c.tree, 'the tree is where it was, as it was')
  assert.equal(c.h.reg.get(HOST)?.dir, c.flat, 'the row still says flat')
  assert.equal(fs.existsSync(path.join(c.h.dirs.dataDir, 'layout', `${HOST}.journal`)), false, 'no journal left')
  outsideUntouched(c)
}

function outsideUntouched(c: Case): void {
  const now = fingerprint(c.h.dirs.dataDir, { also: { outside: c.outside } }).tree.filter((l) =>
    l.startsWith('<outside>/'),
  )
  assert.deepEqual(
    now,
    c.before.tree.filter((l) => l.startsWith('<outside>/')),
    'the dir outside the data root is untouched',
  )
}

void test('FIFOs, sockets and device nodes in a tree move with it, exactly', async (t) => {
  const { c, result } = await moveCase(
    t,
    'after-fence',
    () => undefined,
    (x) => {
      execFileSync('mkfifo', [path.join(x.flat, 'a-fifo')])
      execFileSync('mknod', [path.join(x.flat, 'a-null'), 'c', '1', '3'])
      execFileSync('python3', [
        '-c',
        `import socket; s=socket.socket(socket.AF_UNIX); s.bind(${JSON.stringify(path.join(x.flat, 'sub', 'a.sock'))})`,
      ])
    },
  )
  assert.equal(result?.outcome, 'moved', result?.reason)
  assert.deepEqual(treeLines(c.nested), c.tree, 'the tree arrived as it left')
  assert.ok(
    treeLines(c.nested).some((l) => l.startsWith('a-fifo fifo')) &&
      treeLines(c.nested).some((l) => l.startsWith('a-null chardev')),
  )
  outsideUntouched(c)
})

void test("a hard link to a neighbour's file, made after the fence: held, its marker the one change", async (t) => {
  const { c, result } = await moveCase(t, 'after-fence', (x) => {
    fs.linkSync(path.join(flatPaths(x.h.dirs, 'b.example.com').dir, 'index.html'), path.join(x.flat, 'stolen.html'))
  })
  assert.equal(result?.outcome, 'held')
  assert.match(result.reason, /a file of its has a second name: stolen\.html has 2 links/)
  assert.equal(result.code, 'second_name')
  const { added } = changed(c)
  assert.ok(
    added.some((l) => l.startsWith(`layout/${HOST}.hold file`)),
    added.join('\n'),
  )
  assert.equal(c.h.reg.get(HOST)?.dir, c.flat)
  assert.ok(fs.existsSync(path.join(c.flat, 'index.html')))
  outsideUntouched(c)
})

void test('the dir swapped for a symlink out of the data root after the fence: held, nothing followed', async (t) => {
  const { c, result } = await moveCase(t, 'after-fence', (x) => {
    fs.renameSync(x.flat, `${x.flat}.real`)
    fs.symlinkSync(x.outside, x.flat)
  })
  assert.equal(result?.outcome, 'held')
  assert.match(result.reason, /a\.example\.com is a symlink/)
  assert.equal(result.code, 'symlink_source')
  assert.equal(fs.lstatSync(c.flat).isSymbolicLink(), true, 'the link is where it was')
  assert.equal(fs.existsSync(c.nested), false, 'nothing at the nested dir')
  assert.equal(c.h.reg.get(HOST)?.dir, c.flat)
  outsideUntouched(c)
})

void test('the dir swapped for a symlink after preflight is not moved, nor its row pointed at it', async (t) => {
  const { c, result } = await moveCase(t, 'after-preflight', (x) => {
    fs.renameSync(x.flat, `${x.flat}.real`)
    fs.symlinkSync(x.outside, x.flat)
  })
  assert.notEqual(result?.outcome, 'moved', result?.reason)
  assert.equal(
    fs.lstatSync(c.nested, { throwIfNoEntry: false })?.isSymbolicLink() ?? false,
    false,
    'no symlink at the nested dir',
  )
  assert.notEqual(c.h.reg.get(HOST)?.dir, c.nested, 'the row does not serve the link')
  outsideUntouched(c)
})

void test('the dir gone after the fence: failed, files missing, nothing made at the destination', async (t) => {
  const { c, result } = await moveCase(t, 'after-fence', (x) =>
    fs.renameSync(x.flat, path.join(x.h.dirs.dataDir, 'gone')),
  )
  assert.equal(result?.outcome, 'failed')
  assert.match(result.reason, /files missing: .*a\.example\.com does not exist/)
  assert.equal(result.code, 'files_missing')
  assert.equal(fs.existsSync(c.nested), false)
  assert.equal(c.h.reg.get(HOST)?.dir, c.flat)
  assert.equal(fs.existsSync(path.join(c.h.dirs.dataDir, 'layout', `${HOST}.journal`)), false)
})

void test('the dir gone after its journal: failed, files missing, the journal removed', async (t) => {
  const { c, result } = await moveCase(t, 'after-journal', (x) =>
    fs.renameSync(x.flat, path.join(x.h.dirs.dataDir, 'gone')),
  )
  assert.equal(result?.outcome, 'failed')
  assert.match(result.reason, /files missing/)
  assert.equal(result.code, 'files_missing')
  assert.equal(fs.existsSync(c.nested), false)
  assert.equal(fs.existsSync(path.join(c.h.dirs.dataDir, 'layout', `${HOST}.journal`)), false)
  assert.equal(c.h.fence.fenced(HOST), undefined, 'the fence lifted')
})

void test('a dir that appears at the destination after the journal is set aside, noted, and the move goes on', async (t) => {
  const { c, result } = await moveCase(t, 'after-journal', (x) => {
    fs.mkdirSync(x.nested, { recursive: true })
    fs.writeFileSync(path.join(x.nested, 'planted.txt'), 'in the way')
  })
  assert.equal(result?.outcome, 'moved', result?.reason)
  assert.deepEqual(treeLines(c.nested), c.tree)
  const asideRoot = path.join(c.h.dirs.dataDir, 'layout', 'aside', HOST)
  const [stamp] = fs.readdirSync(asideRoot)
  assert.ok(stamp !== undefined)
  assert.equal(fs.readFileSync(path.join(asideRoot, stamp, 'data', 'planted.txt'), 'utf8'), 'in the way')
  assert.match(c.h.pass.note(HOST), /set aside at .*: data/)
})

void test('a dir that appears at the destination after its parents were made: not renamed over; failed, files kept', async (t) => {
  const { c, result } = await moveCase(t, 'after-prepare', (x) => {
    fs.mkdirSync(x.nested)
  })
  assert.equal(result?.outcome, 'failed')
  assert.match(result.reason, /appeared after it was cleared; not renaming over it/)
  assert.equal(result.code, 'rename_failed')
  stayed(c)
})

void test('the nested root swapped for a symlink out of the data root: the link set aside, the move into a real dir', async (t) => {
  const { c, result } = await moveCase(t, 'after-journal', (x) => {
    fs.mkdirSync(path.dirname(nestedRoot(x.h.dirs, HOST)), { recursive: true })
    fs.symlinkSync(x.outside, nestedRoot(x.h.dirs, HOST))
  })
  assert.equal(result?.outcome, 'moved', result?.reason)
  assert.equal(fs.lstatSync(nestedRoot(c.h.dirs, HOST)).isDirectory(), true, 'the nested root is a real directory')
  assert.deepEqual(treeLines(c.nested), c.tree)
  assert.match(c.h.pass.note(HOST), new RegExp(`set aside at .*: ${HOST.replaceAll('.', '\\.')}`))
  outsideUntouched(c)
})

void test('modes changed and a file added after preflight travel with the tree', async (t) => {
  let tree: string[] = []
  const { c, result } = await moveCase(t, 'after-preflight', (x) => {
    fs.chmodSync(path.join(x.flat, 'private'), 0o000)
    fs.chmodSync(path.join(x.flat, 'sub', 'dir', 'run.sh'), 0o4755)
    fs.writeFileSync(path.join(x.flat, 'late.txt'), 'written while fenced')
    tree = treeLines(x.flat)
  })
  assert.equal(result?.outcome, 'moved', result?.reason)
  assert.deepEqual(treeLines(c.nested), tree, 'the tree as it was at the rename, modes and all')
  outsideUntouched(c)
})

void test('a file name that is not valid UTF-8 moves with its bytes', async (t) => {
  const { c, result } = await moveCase(
    t,
    'after-fence',
    () => undefined,
    (x) => {
      fs.writeFileSync(
        Buffer.concat([Buffer.from(`${x.flat}/`), Buffer.from([0x66, 0xff, 0xfe, 0x2e, 0x74])]),
        'latin-1 name',
      )
    },
  )
  assert.equal(result?.outcome, 'moved', result?.reason)
  assert.deepEqual(treeLines(c.nested), c.tree)
})

void test('a symlink out of the data root planted inside the tree after preflight moves as a link, never followed', async (t) => {
  const { c, result } = await moveCase(t, 'after-preflight', (x) => {
    fs.symlinkSync(x.outside, path.join(x.flat, 'sub', 'escape'))
  })
  assert.equal(result?.outcome, 'moved', result?.reason)
  assert.ok(
    treeLines(c.nested).some((l) => l.startsWith(`sub/escape link 777 ${Buffer.byteLength(c.outside)} ${c.outside}`)),
    'the link moved as a link',
  )
  outsideUntouched(c)
})
