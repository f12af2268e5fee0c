import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import test from 'node:test'
import { groupId } from '../../src/infra/groups.js'

async function script(t: test.TestContext, body: string): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'layoutd-groups-'))
  t.after(() => fs.rm(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'getent')
  await fs.writeFile(file, `#!/bin/sh\n${body}\n`, { mode: 0o755 })
  return file
}

function warnings(): { warn: (fields: Record<string, unknown>, msg: string) => void; said: string[] } {
  const said: string[] = []
  return { said, warn: (_fields, msg) => said.push(msg) }
}

void test('a group only the name service knows (LDAP, sssd) is found through getent, asked for by name', async (t) => {
  const args = path.join(os.tmpdir(), `layoutd-getent-args-${process.pid}`)
  t.after(() => fs.rm(args, { force: true }))
  const getent = await script(t, `echo "$@" > ${args}\necho 'carlos-sockets:*:4242:edge,www'`)
  assert.equal(await groupId('carlos-sockets', { getent }), 4242)
  assert.equal((await fs.readFile(args, 'utf8')).trim(), 'group carlos-sockets')
})

void test('the real getent answers a group of this system', async () => {
  assert.equal(await groupId('root'), 0)
})

void test('no such group (getent exits 2) is -1, and nothing is logged', async (t) => {
  const getent = await script(t, 'exit 2')
  const log = warnings()
  assert.equal(await groupId('carlos-sockets', { getent, logger: log }), -1)
  assert.deepEqual(log.said, [])
  assert.equal(await groupId('no-such-group-layoutd-test', { logger: log }), -1)
  assert.deepEqual(log.said, [])
})

void test('a lookup that fails is no group, logged with the group and the command, never a throw', async (t) => {
  const failing = await script(t, 'echo "ldap: server down" >&2; exit 1')
  const log = warnings()
  assert.equal(await groupId('carlos-sockets', { getent: failing, logger: log }), -1)
  const missing = path.join(os.tmpdir(), 'no-such-getent-layoutd')
  assert.equal(await groupId('carlos-sockets', { getent: missing, logger: log }), -1)
  assert.equal(log.said.length, 2)
  assert.match(log.said[0] ?? '', /carlos-sockets.*failed; treated as no such group/)
  assert.match(log.said[1] ?? '', new RegExp(`${missing} failed`))
})
