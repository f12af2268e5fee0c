// The Dockerfile (no image is built here: the test reads it, and runs its
// HEALTHCHECK command against the real agent): /data and /deploy are
// volumes, the agent listens on loopback unless told otherwise, the base is
// an LTS line the code runs on, and the health check answers what /livez does.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { SYNC_CONCURRENCY } from '../../src/infra/fsutil.js'
import { AgentProcess, makeSandbox } from '../helpers/agent-process.js'
import { tmpDir } from '../helpers/tmp.js'
import { run } from '../helpers/child.js'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))

/** The Dockerfile's instructions, continuation lines joined, comments dropped. */
async function instructions(): Promise<Array<{ op: string; args: string }>> {
  const text = (await fs.readFile(path.join(ROOT, 'Dockerfile'), 'utf8')).replace(/\\\n/g, ' ')
  return text
    .split('\n')
    .filter((line) => line.trim() !== '' && !line.startsWith('#'))
    .map((line) => {
      const m = /^([A-Z]+)\s+(.*)$/.exec(line.trim())
      assert.ok(m?.[1] !== undefined && m[2] !== undefined, `an instruction: ${line}`)
      return { op: m[1], args: m[2] }
    })
}

async function healthcheck(): Promise<string[]> {
  const hc = (await instructions()).filter((i) => i.op === 'HEALTHCHECK')
  assert.equal(hc.length, 1)
  const cmd = /\bCMD\s+(\[.*\])\s*$/.exec(hc[0]?.args ?? '')?.[1]
  assert.ok(cmd !== undefined, 'HEALTHCHECK CMD in exec form')
  const argv = JSON.parse(cmd) as string[]
  assert.equal(argv[0], 'node', 'the image has node and no curl')
  assert.match(argv.join(' '), /\/livez/)
  return argv
}

void test('the image: /data and /deploy are volumes, the listen address is loopback, the base an LTS line the code runs on', async () => {
  const all = await instructions()
  const volumes = all.filter((i) => i.op === 'VOLUME').flatMap((i) => JSON.parse(i.args) as string[])
  assert.deepEqual(volumes.sort(), ['/data', '/deploy'])
  const env = all
    .filter((i) => i.op === 'ENV')
    .map((i) => i.args)
    .join(' ')
  assert.match(env, /CARLOS_DATA_DIR=\/data\b/)
  assert.match(env, /CARLOS_DEPLOYMENT_DIR=\/deploy\b/)
  assert.match(
    env,
    /CARLOS_AGENT_LISTEN=127\.0\.0\.1:9740\b/,
    'loopback unless the operator gives a token and an address',
  )
  assert.doesNotMatch(env, /CARLOS_AGENT_TOKEN/, 'no token baked into the image')
  assert.match(
    env,
    new RegExp(`\\bUV_THREADPOOL_SIZE=${SYNC_CONCURRENCY}\\b`),
    'a thread pool as large as the fsyncs a converge keeps in flight (design §3.3)',
  )
  assert.match(env, /\bMALLOC_ARENA_MAX=2\b/, 'its threads share two malloc arenas (design §9)')
  const image = /^ARG NODE_IMAGE=node:(\d+)-/m.exec(await fs.readFile(path.join(ROOT, 'Dockerfile'), 'utf8'))
  const major = Number(image?.[1])
  const engines = (
    JSON.parse(await fs.readFile(path.join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } }
  ).engines.node
  const floor = Number(/^>=(\d+)$/.exec(engines)?.[1])
  assert.ok(major >= floor && major % 2 === 0, `node ${major}: an even (LTS) line that engines "${engines}" allows`)
  assert.equal(
    Number(process.versions.node.split('.')[0]),
    major,
    `the suite runs on the image's Node line (${major}), not ${process.version}`,
  )
  const sqlite = JSON.parse(await fs.readFile(path.join(ROOT, 'node_modules/better-sqlite3/package.json'), 'utf8')) as {
    engines: { node: string }
  }
  const sqliteFloor = Number(/^>=(\d+)$/.exec(sqlite.engines.node)?.[1])
  assert.ok(major >= sqliteFloor, `better-sqlite3 (engines "${sqlite.engines.node}") runs on node ${major}`)
  assert.deepEqual(
    all.filter((i) => i.op === 'ENTRYPOINT').map((i) => JSON.parse(i.args) as string[]),
    [['node', '--max-semi-space-size=4', '--heap-growing-percent=100', 'dist/src/main.js']],
    'node is PID 1: SIGTERM reaches the agent; the V8 flags of design §9',
  )
})

void test('every path the build copies is in the repository and not ignored by .dockerignore', async () => {
  const ignored = (await fs.readFile(path.join(ROOT, '.dockerignore'), 'utf8'))
    .split('\n')
    .filter((l) => l !== '' && !l.startsWith('#'))
  for (const must of ['node_modules', 'dist', 'data', 'deploy'])
    assert.ok(ignored.includes(must), `.dockerignore leaves out ${must}`)
  const copied = (await instructions())
    .filter((i) => i.op === 'COPY' && !i.args.startsWith('--from'))
    .flatMap((i) => i.args.split(/\s+/).slice(0, -1))
  assert.ok(copied.length >= 5)
  for (const p of copied) {
    await fs.access(path.join(ROOT, p))
    assert.ok(!ignored.includes(p), `${p} is copied and ignored`)
  }
  // npm ci builds in the image: every folder the build script reads from must be copied before it.
  const build = (
    JSON.parse(await fs.readFile(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: { build: string } }
  ).scripts.build
  for (const [, folder] of build.matchAll(/\b(scripts|src)\//g))
    assert.ok(copied.includes(folder ?? ''), `the build reads ${folder}/, which the image's build stage does not copy`)
  // The C walk: its sources go in, and what node-gyp made comes out to the run stage (src/infra/pass/c-walk.ts).
  for (const p of ['binding.gyp', 'native']) assert.ok(copied.includes(p), `the build stage copies ${p}`)
  const fromBuild = (await instructions()).filter((i) => i.op === 'COPY' && i.args.startsWith('--from=build'))
  assert.ok(
    fromBuild.some((i) => /\/app\/build\/Release\/walk\.node \.\/build\/Release\/walk\.node$/.test(i.args)),
    'the run stage has the C walk where c-walk.ts loads it',
  )
})

void test('the HEALTHCHECK command passes while the agent lives, on its address or a wildcard, and fails once it is gone', async (t) => {
  const [node, ...args] = await healthcheck()
  assert.ok(node !== undefined)
  const sb = await makeSandbox(await tmpDir(t, 'layoutd-docker-'))
  const agent = await AgentProcess.start(sb)
  t.after(() => agent.kill())
  const port = new URL(agent.url).port
  const check = (listen: string) =>
    run(process.execPath, args, { env: { PATH: process.env.PATH, CARLOS_AGENT_LISTEN: listen } })
  await check(`127.0.0.1:${port}`)
  await check(`0.0.0.0:${port}`)
  await agent.stop()
  await assert.rejects(check(`127.0.0.1:${port}`), (err: { code?: number }) => err.code === 1)
})

void test('the image puts layoutd on PATH, for docker exec … layoutd status', async () => {
  const runs = (await instructions()).filter((i) => i.op === 'RUN').map((i) => i.args)
  assert.ok(
    runs.some((r) => /\bln -s \/app\/bin\/layoutd \/usr\/local\/bin\/layoutd\b/.test(r)),
    'a symlink /usr/local/bin/layoutd to the package’s bin/layoutd',
  )
  const readme = await fs.readFile(path.join(ROOT, 'README.md'), 'utf8')
  assert.match(readme, /docker exec layoutd layoutd status/, 'the README says how to run the CLI in the container')
  assert.match(readme, /ln -s \/opt\/layoutd\/bin\/layoutd \/usr\/local\/bin\/layoutd/, 'and on a systemd box')
})
