// The agent's token (design §6): made once at first start in D/agent.token
// (0600, its owner, whole or not at all), reused after; a token file another
// user could read or replace, a symlink, or no token at all stops the start,
// naming the file, never its text.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { loadConfig } from '../../src/config.js'
import { ConfigError } from '../../src/errors.js'
import { AGENT_TOKEN_FILE, agentToken } from '../../src/infra/agent-token.js'
import { tmpDir } from '../helpers/tmp.js'

async function dataRoot(t: Parameters<typeof tmpDir>[0]): Promise<string> {
  const d = path.join(await tmpDir(t), 'data')
  await fs.mkdir(d)
  return d
}

/** agentToken's refusal: a ConfigError matching message, which never holds secret. */
function refuses(env: Record<string, string>, message: RegExp, secret?: string): void {
  assert.throws(
    () => agentToken(loadConfig(env)),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError, String(err))
      assert.match(err.message, message)
      if (secret !== undefined) assert.ok(!err.message.includes(secret), err.message)
      return true
    },
  )
}

void test('made at first start: 64 hex digits, 0600, the agent its owner; the same token at every start after', async (t) => {
  const d = await dataRoot(t)
  const first = agentToken(loadConfig({ CARLOS_DATA_DIR: d }))
  assert.equal(first.made, true)
  assert.equal(first.configured, false)
  assert.match(first.token, /^[0-9a-f]{64}$/)
  const file = path.join(d, AGENT_TOKEN_FILE)
  assert.equal(first.source, file)
  const st = await fs.lstat(file)
  assert.ok(st.isFile())
  assert.equal(st.mode & 0o777, 0o600)
  assert.equal(st.uid, process.geteuid?.())
  assert.equal(await fs.readFile(file, 'utf8'), `${first.token}\n`)
  assert.deepEqual(
    (await fs.readdir(d)).filter((n) => n.startsWith(AGENT_TOKEN_FILE)),
    [AGENT_TOKEN_FILE],
    'no temporary file is left',
  )
  const again = agentToken(loadConfig({ CARLOS_DATA_DIR: d }))
  assert.deepEqual(again, { ...first, made: false })
})

void test('CARLOS_AGENT_TOKEN wins; else the file CARLOS_AGENT_TOKEN_FILE names, which a group may read', async (t) => {
  const d = await dataRoot(t)
  const env = { CARLOS_DATA_DIR: d, CARLOS_AGENT_TOKEN: 'e'.repeat(20) }
  assert.deepEqual(agentToken(loadConfig(env)), {
    token: 'e'.repeat(20),
    source: 'CARLOS_AGENT_TOKEN',
    configured: true,
    made: false,
  })
  const file = path.join(d, '..', 'token')
  await fs.writeFile(file, `${'g'.repeat(32)}\n`)
  await fs.chmod(file, 0o640)
  const fromFile = agentToken(loadConfig({ CARLOS_DATA_DIR: d, CARLOS_AGENT_TOKEN_FILE: file }))
  assert.deepEqual(fromFile, { token: 'g'.repeat(32), source: path.resolve(file), configured: true, made: false })
  await assert.rejects(fs.lstat(path.join(d, AGENT_TOKEN_FILE)), { code: 'ENOENT' }, 'no D/agent.token is made')

  await fs.chmod(file, 0o644)
  refuses({ CARLOS_DATA_DIR: d, CARLOS_AGENT_TOKEN_FILE: file }, /is open to every user \(mode 0644\)/, 'g'.repeat(32))
  await fs.chmod(file, 0o600)
  await fs.writeFile(file, 'short\n')
  refuses(
    { CARLOS_DATA_DIR: d, CARLOS_AGENT_TOKEN_FILE: file },
    /^CARLOS_AGENT_TOKEN_FILE: .*token holds \(hidden, 5 bytes\), not a bearer token of at least 16 bytes$/,
    'short',
  )
  refuses({ CARLOS_DATA_DIR: d, CARLOS_AGENT_TOKEN_FILE: path.join(d, 'absent') }, /cannot be read \(ENOENT\)/)
})

void test('D/agent.token that is a symlink, not a regular file, open to others, short or not its own stops the start', async (t) => {
  const d = await dataRoot(t)
  const file = path.join(d, AGENT_TOKEN_FILE)
  const env = { CARLOS_DATA_DIR: d }
  const secret = 's'.repeat(40)
  const elsewhere = path.join(d, '..', 'elsewhere')
  await fs.writeFile(elsewhere, secret, { mode: 0o600 })

  await fs.symlink(elsewhere, file)
  refuses(env, /agent\.token is a symlink/, secret)
  await fs.rm(file)

  await fs.mkdir(file)
  refuses(env, /agent\.token is not a regular file/)
  await fs.rmdir(file)
  execFileSync('mkfifo', [file])
  refuses(env, /agent\.token is not a regular file/)
  await fs.rm(file)

  await fs.writeFile(file, secret, { mode: 0o600 })
  await fs.chmod(file, 0o640)
  refuses(env, /is open to other users \(mode 0640\); chmod 600/, secret)
  await fs.chmod(file, 0o604)
  refuses(env, /is open to other users \(mode 0604\)/, secret)

  await fs.chmod(file, 0o600)
  await fs.writeFile(file, 'tiny\n')
  refuses(env, /holds \(hidden, 4 bytes\), not a bearer token of at least 16 bytes/, 'tiny')
  await fs.writeFile(file, '')
  refuses(env, /holds \(hidden, 0 bytes\)/)

  await fs.writeFile(file, secret)
  await fs.chown(file, 65534, 65534)
  refuses(env, /belongs to uid 65534, not to the agent's/, secret)
  await fs.chown(file, process.geteuid?.() ?? 0, process.getegid?.() ?? 0)
  assert.equal(agentToken(loadConfig(env)).token, secret, 'a whole, private file of its own is the token')
})
