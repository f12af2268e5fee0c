// The data root's lock (design §4.4): one holder at a time, who it is, and
// released on a clean stop. Across processes and kill -9: test/e2e/serve.test.ts.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { AppError } from '../../src/errors.js'
import { AGENT_HOLDER_FILE, AgentLock } from '../../src/infra/agent-lock.js'
import { tmpDir } from '../helpers/tmp.js'

void test('a second holder is refused naming the first one, its pid and address; a release lets the next one in', async (t) => {
  const dataDir = await tmpDir(t)
  const first = AgentLock.acquire(dataDir)
  t.after(() => first.release())
  const before = await fs.readFile(path.join(dataDir, AGENT_HOLDER_FILE), 'utf8')
  // What the CLI finds its agent by: the data root, its pid, this start (design §8 "Which agent").
  const holder = JSON.parse(before) as Record<string, unknown>
  assert.equal(holder.dataDir, await fs.realpath(dataDir))
  assert.equal(holder.pid, process.pid)
  assert.match(String(holder.startId), /^[0-9a-f-]{36}$/)
  assert.deepEqual(first.holder, holder)
  const identity = { pid: holder.pid, dataDir: holder.dataDir, startId: holder.startId, startedAt: holder.startedAt }
  assert.deepEqual(first.identity, identity, 'GET /agent answers the holder but its address')
  assert.throws(
    () => AgentLock.acquire(dataDir),
    (err: unknown) =>
      err instanceof AppError &&
      err.code === 'data_dir_locked' &&
      err.message ===
        `${dataDir} is in use by another layoutd serve (pid ${process.pid}, not listening yet); one agent per data root: stop that one first`,
  )
  assert.equal(
    await fs.readFile(path.join(dataDir, AGENT_HOLDER_FILE), 'utf8'),
    before,
    'the refused one wrote nothing',
  )

  first.listening('127.0.0.1:9740')
  assert.throws(() => AgentLock.acquire(dataDir), {
    message: new RegExp(`\\(pid ${process.pid}, listening on 127\\.0\\.0\\.1:9740\\)`),
  })

  first.release()
  await assert.rejects(
    fs.stat(path.join(dataDir, AGENT_HOLDER_FILE)),
    { code: 'ENOENT' },
    'a clean stop leaves no holder',
  )
  const next = AgentLock.acquire(dataDir)
  next.release()
  next.release()
})

void test('a holder file that cannot be read still refuses, saying so', async (t) => {
  const dataDir = await tmpDir(t)
  const first = AgentLock.acquire(dataDir)
  t.after(() => first.release())
  await fs.writeFile(path.join(dataDir, AGENT_HOLDER_FILE), '{not json')
  assert.throws(() => AgentLock.acquire(dataDir), {
    message: /in use by another layoutd serve \(its holder could not be read from .*agent\.json: /,
  })
})
