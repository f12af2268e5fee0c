// What `layoutd status` loads: the commands that talk HTTP to the agent run
// in a fraction of the agent's start, so they must not import a schema
// compiler, the HTTP server, the logger, SQLite or undici (design §8). A
// child process records every module it resolves through a loader hook;
// the test reads that list.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { tmpDir } from '../helpers/tmp.js'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..')
const HEAVY = /\/node_modules\/(undici|typebox|fastify|@fastify|pino|pino-pretty|better-sqlite3|prom-client|yaml|ajv)\//

function modulesLoadedBy(dir: string, argv: string[], env: NodeJS.ProcessEnv = {}): string[] {
  const hooks = path.join(dir, 'hooks.mjs')
  const log = path.join(dir, 'resolved.txt')
  fs.writeFileSync(
    hooks,
    `import fs from 'node:fs'\n` +
      `export async function resolve(spec, ctx, next) { const r = await next(spec, ctx); fs.appendFileSync(${JSON.stringify(log)}, r.url + '\\n'); return r }\n`,
  )
  const register = path.join(dir, 'register.mjs')
  fs.writeFileSync(register, `import { register } from 'node:module'\nregister(${JSON.stringify('file://' + hooks)})\n`)
  const r = spawnSync(process.execPath, ['--import', register, path.join(ROOT, 'bin/layoutd'), ...argv], { encoding: 'utf8', env: { PATH: process.env.PATH, ...env } })
  assert.ok(fs.existsSync(log), `the hook recorded nothing: ${r.stderr}`)
  return fs.readFileSync(log, 'utf8').split('\n').filter(Boolean)
}

void test('status and converge load no schema compiler, server, logger, SQLite or undici; routes does', async (t) => {
  for (const argv of [['status', '--url', 'http://127.0.0.1:1'], ['converge', '--url', 'http://127.0.0.1:1']]) {
    const loaded = modulesLoadedBy(await tmpDir(t), argv)
    assert.ok(loaded.some((u) => u.endsWith('/dist/src/cli/agent-client.js')), `the hook saw the command: ${loaded.join(' ')}`)
    assert.deepEqual(loaded.filter((u) => HEAVY.test(u)), [], argv[0])
  }
  // The check itself can fail: a command that opens the registry resolves SQLite.
  const dir = await tmpDir(t)
  const routes = modulesLoadedBy(dir, ['routes', 'list'], { CARLOS_DATA_DIR: path.join(dir, 'data') })
  assert.ok(routes.some((u) => /\/node_modules\/better-sqlite3\//.test(u)), routes.join(' '))
})
