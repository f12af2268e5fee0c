// A start that fails, against the real `layoutd serve` process: it exits 1
// with one line naming the cause (so systemd restarts it and marks it
// failed), never 0 behind a stack; and the CLI beside a running agent never
// creates a registry that agent does not read.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { AgentProcess, MAIN_JS, makeSandbox, runCli, sandboxEnv, type Sandbox } from '../helpers/agent-process.js'
import { ended, spawnFor } from '../helpers/child.js'

async function sandbox(t: TestContext): Promise<Sandbox> {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'layoutd-startfail-'))
  t.after(() => fs.rm(root, { recursive: true, force: true }))
  return makeSandbox(root)
}

void test('a data root whose layout is a symlink: serve exits 1 with one line naming it', async (t) => {
  const sb = await sandbox(t)
  const elsewhere = path.join(sb.root, 'elsewhere')
  await fs.mkdir(elsewhere)
  await fs.symlink(elsewhere, path.join(sb.dataDir, 'layout'))
  const r = await runCli(sb, ['serve'])
  assert.equal(r.exit.code, 1, r.stderr)
  // The log (JSON lines on stderr): one line says the start failed, naming the cause, with no stack.
  const failed = r.stderr
    .trim()
    .split('\n')
    .filter((l) => l.includes('start-up failed'))
  assert.equal(failed.length, 1, r.stderr)
  const line = JSON.parse(failed[0] ?? '') as { level: number; msg: string; code?: string }
  assert.equal(line.level, 60)
  assert.equal(line.code, 'data_root_not_directory')
  assert.match(line.msg, new RegExp(`^layoutd: start-up failed: ${sb.dataDir}/layout is a symlink`))
  assert.doesNotMatch(r.stderr, /"stack"|\n\s+at /)
})

void test('a registry that cannot be opened: serve exits 1 with one line naming the file', async (t) => {
  const sb = await sandbox(t)
  // A directory where the file should be: unopenable to root as to anyone (a chmod 000 file is not, to root).
  const file = path.join(sb.dataDir, 'registry.db')
  await fs.mkdir(file)
  const r = await runCli(sb, ['serve'])
  assert.equal(r.exit.code, 1, r.stderr)
  const lines = r.stderr.trim().split('\n')
  assert.equal(lines.length, 1, r.stderr)
  assert.match(lines[0] ?? '', new RegExp(`^layoutd: cannot open the registry ${file}: `))
})

void test('routes add against a registry removed under a running agent is refused, and creates nothing', async (t) => {
  const sb = await sandbox(t)
  const agent = await AgentProcess.start(sb)
  t.after(() => agent.stop())
  await agent.waitReady(20_000)
  const file = path.join(sb.dataDir, 'registry.db')
  await fs.rm(file)
  const r = await runCli(sb, ['routes', 'add', 'a.example.com', '--dir', '/srv/a', '--socket', '/run/a.sock'])
  assert.equal(r.exit.code, 1, r.stderr)
  assert.match(r.stderr, new RegExp(`refused: ${file} is gone while the agent serving this data root runs`))
  await assert.rejects(fs.stat(file), { code: 'ENOENT' }, 'no new database the agent would never read')
  await agent.stop()
  // With no agent running, the command makes the registry, as a first session does.
  const first = await runCli(sb, ['routes', 'add', 'a.example.com', '--dir', '/srv/a', '--socket', '/run/a.sock'])
  assert.equal(first.exit.code, 0, first.stderr)
})

void test('chmod 000 on the registry, the agent restarted without the power to override file modes: exit 1, one line naming the file', async (t) => {
  assert.equal(process.getuid?.(), 0, 'the suite runs as root, to take that power from the agent it starts')
  const sb = await sandbox(t)
  const file = path.join(sb.dataDir, 'registry.db')
  // A registry made as the agent would, then closed to everyone.
  assert.equal((await runCli(sb, ['routes', 'list'])).exit.code, 0)
  await fs.chmod(file, 0o000)
  // Root, but without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (util-linux's setpriv), as an agent run by an
  // unprivileged user would be: the file's mode then applies. A user of its own would need the checkout, and the
  // node under it, readable by that user, which a clone in a private temp directory is not.
  const drop = '-dac_override,-dac_read_search'
  const child = spawnFor(
    t,
    'setpriv',
    ['--bounding-set', drop, '--inh-caps', drop, '--', process.execPath, MAIN_JS, 'serve'],
    {
      env: sandboxEnv(sb),
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  )
  let stderr = ''
  child.stderr?.setEncoding('utf8').on('data', (s: string) => (stderr += s))
  const { code } = await ended(child, 'layoutd serve without DAC override')
  assert.equal(code, 1, stderr)
  const lines = stderr.trim().split('\n')
  assert.equal(lines.length, 1, stderr)
  assert.match(lines[0] ?? '', new RegExp(`^layoutd: cannot open the registry ${file}: unable to open database file`))
})
