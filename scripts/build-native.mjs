// The build's C step (`npm run build`, after tsc): compiles the C walk
// (native/walk.c, binding.gyp) with node-gyp into build/Release/walk.node,
// for the node that runs the build (npm_config_nodedir, which ./nodew
// sets, points node-gyp at that node's headers, so nothing is downloaded).
// Skipped when the addon is newer than its sources. Without a compiler
// (python3, make and a C compiler) the build goes on and says so: the
// agent then walks in JavaScript, whose walk takes some two thirds longer
// (design §3.3), and says so at start; test/infra/pass/c-walk.test.ts
// fails until the addon is built.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import process from 'node:process'
import { fileURLToPath } from 'node:url'

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..')
const addon = path.join(root, 'build', 'Release', 'walk.node')
const sources = ['binding.gyp', 'native/walk.c', 'native/trim.c', 'native/trim.h'].map((f) => path.join(root, f))

function mtime(p) {
  try {
    return fs.statSync(p).mtimeMs
  } catch {
    return undefined
  }
}

const built = mtime(addon)
if (built !== undefined && sources.every((s) => (mtime(s) ?? Infinity) <= built)) process.exit(0)

// npm names its own node-gyp to the scripts it runs; outside npm, one on PATH.
const gyp = process.env.npm_config_node_gyp
const [cmd, args] = gyp ? [process.execPath, [gyp, 'rebuild']] : ['node-gyp', ['rebuild']]
const run = spawnSync(cmd, args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
if (run.status === 0) process.exit(0)
const why = run.error?.message ?? `${[run.stdout, run.stderr].join('\n').trim().split('\n').slice(-12).join('\n')}`
process.stderr.write(
  `build: the C walk (native/walk.c) was not built, so the agent will walk sources in JavaScript ` +
    `(design §3.3); node-gyp needs python3, make and a C compiler:\n${why}\n`,
)
