// Rows nested by an earlier build (root 0750 in the agent's group, data/
// open to others) are brought to the modes a move makes, on a run of the
// leg, without a move: never a claimed or fenced host's, never through a
// symlink (design §2).
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { nestedRoot } from '../../../src/domain/paths.js'
import { holdEdgeModes } from '../../../src/infra/pass/edge-modes.js'
import { Slicer } from '../../../src/domain/loop-turns.js'
import { treeLines } from '../../helpers/tenants.js'
import { harness, outcomes } from './pass-harness.js'

/** Root can give a directory any group; elsewhere the group is left alone (-1) and the mode alone is held. */
const canChown = process.getuid?.() === 0
const SOCKETS = canChown ? 4242 : -1
const AGENTS = canChown ? 4343 : -1

/** Everything under a directory, its own line (its mode) left out. */
function below(dir: string): string[] {
  return treeLines(dir).filter((line) => !line.startsWith(' dir '))
}

function modeOf(p: string): number {
  return fs.lstatSync(p).mode & 0o7777
}

/** The tree as an earlier build left it: root 0750 in the agent's group, data/ as the tenant had it. */
function asEarlierBuild(root: string, dataMode: number, dataGid = AGENTS): void {
  fs.chmodSync(root, 0o750)
  fs.chmodSync(path.join(root, 'data'), dataMode)
  if (canChown) {
    fs.chownSync(root, 0, AGENTS)
    fs.chownSync(path.join(root, 'data'), 0, dataGid)
  }
}

void test('a run repairs roots an earlier build nested, closes data/ first, and leaves claimed and fenced hosts', async (t) => {
  const h = await harness(t, { socketsGid: () => Promise.resolve(SOCKETS) })
  const [old, shared, awake, fenced, right] = ['old', 'shared', 'awake', 'fenced', 'right'].map(
    (n) => `${n}.example.com`,
  ) as [string, string, string, string, string]
  for (const [i, host] of [old, shared, awake, fenced, right].entries()) h.addNested(host, i + 1)
  const root = (host: string) => nestedRoot(h.dirs, host)
  const data = (host: string) => path.join(root(host), 'data')
  asEarlierBuild(root(old), 0o755)
  asEarlierBuild(root(shared), 0o2775, SOCKETS)
  asEarlierBuild(root(awake), 0o755)
  asEarlierBuild(root(fenced), 0o755)
  fs.chmodSync(root(right), 0o710)
  if (canChown) fs.chownSync(root(right), 0, SOCKETS)
  fs.chmodSync(data(right), 0o755)
  const trees = new Map([old, shared, awake, fenced, right].map((x) => [x, below(data(x))]))
  h.claims.awake.add(awake)
  h.fence.fence([fenced], 9)

  assert.deepEqual(outcomes(await h.converge('nested')), {
    [old]: 'unchanged',
    [shared]: 'unchanged',
    [awake]: 'unchanged',
    [fenced]: 'unchanged',
    [right]: 'unchanged',
  })
  for (const host of [old, shared]) {
    assert.equal(modeOf(root(host)), 0o710, host)
    if (canChown) assert.equal(fs.lstatSync(root(host)).gid, SOCKETS, host)
  }
  assert.equal(modeOf(data(old)), 0o750, 'others lose everything; its own group keeps its bits')
  assert.equal(modeOf(data(shared)), 0o2700, 'a data/ in the sockets group loses the group bits too')
  for (const host of [awake, fenced]) {
    assert.equal(modeOf(root(host)), 0o750, `${host}: no file of a claimed or fenced host changes`)
    assert.equal(modeOf(data(host)), 0o755, host)
    if (canChown) assert.equal(fs.lstatSync(root(host)).gid, AGENTS, host)
  }
  assert.equal(modeOf(data(right)), 0o755, 'a root already right is not looked under')
  for (const [host, tree] of trees) assert.deepEqual(below(data(host)), tree, `${host}: its files as they were`)
  const line = h.logger.lines.find((l) => l.msg.includes('given mode 0710 for the edge'))
  assert.deepEqual(line?.fields, { repaired: 2, left: 2 })

  // Asleep and unfenced at a later run: theirs too.
  h.claims.awake.delete(awake)
  h.fence.lift([fenced])
  await h.converge('nested')
  for (const host of [awake, fenced]) {
    assert.equal(modeOf(root(host)), 0o710, host)
    assert.equal(modeOf(data(host)), 0o750, host)
  }
})

void test('a root that is a symlink is not followed', async (t) => {
  const h = await harness(t, { socketsGid: () => Promise.resolve(SOCKETS) })
  const host = 'link.example.com'
  h.addNested(host)
  const root = nestedRoot(h.dirs, host)
  const elsewhere = path.join(h.dirs.dataDir, 'elsewhere')
  fs.renameSync(root, elsewhere)
  fs.symlinkSync(elsewhere, root)
  fs.chmodSync(elsewhere, 0o750)
  fs.chmodSync(path.join(elsewhere, 'data'), 0o755)
  const row = h.reg.get(host)
  assert.ok(row)
  const done = await holdEdgeModes([row], {
    dirs: h.dirs,
    gid: SOCKETS,
    slicer: new Slicer(),
    free: () => true,
    logger: h.logger,
  })
  assert.deepEqual(done, { repaired: [], left: [] })
  assert.equal(modeOf(elsewhere), 0o750)
  assert.equal(modeOf(path.join(elsewhere, 'data')), 0o755)
})

void test('the sockets group is asked for only when a move or the modes need it, never by recovery alone', async (t) => {
  let asked = 0
  const h = await harness(t, {
    socketsGid: () => {
      asked++
      return Promise.resolve(SOCKETS)
    },
  })
  const host = 'asked.example.com'
  h.addFlat(host)
  await h.pass.recover('nested')
  await h.pass.restoreHolds('nested')
  assert.equal(asked, 0, 'a start with no journal spawns no getent')
  assert.deepEqual(outcomes(await h.converge('nested')), { [host]: 'moved' })
  assert.ok(asked > 0, 'the move gives run/ the sockets group')
})
