// A reader that goes away ends the command quietly: the real bin/layoutd
// piped into `head -1`, which closes the pipe after its first line. No
// `Error: write EPIPE`, no stack on stderr, and the command exits 141
// (128 + SIGPIPE), as `seq 1000000 | head -1` does.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import fs from 'node:fs/promises'
import path from 'node:path'
import { after, before, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { makeSandbox, sandboxEnv, type Sandbox } from '../helpers/agent-process.js'
import { tmpDir } from '../helpers/tmp.js'
import { fileScope } from '../hostile/box.js'

const BIN = fileURLToPath(new URL('../../../bin/layoutd', import.meta.url))
const file = fileScope(after)
let sb: Sandbox

before(async () => {
  sb = await makeSandbox(await tmpDir(file, 'layoutd-reader-gone-'))
  // Rows enough that `routes list` writes far more than a pipe holds.
  const lines = Array.from({ length: 3000 }, (_, i) =>
    JSON.stringify({ host: `t${String(i).padStart(5, '0')}.example.com`, kind: 'static', hibernate: false }),
  )
  const rows = path.join(sb.root, 'rows.jsonl')
  await fs.writeFile(rows, lines.join('\n') + '\n')
  const r = spawnSync(process.execPath, [BIN, 'routes', 'import', rows], {
    env: sandboxEnv(sb),
    encoding: 'utf8',
    timeout: 60_000,
    killSignal: 'SIGKILL',
  })
  assert.equal(r.status, 0, r.stderr)
})

/** `bin/layoutd ARGS | head -1` in bash: what head printed, layoutd's stderr and exit status. */
function piped(args: string): { head: string; stderr: string; status: string } {
  const errFile = path.join(sb.root, 'stderr')
  const script = `"${process.execPath}" "${BIN}" ${args} 2>"${errFile}" | head -1; echo "status \${PIPESTATUS[0]}" >&2`
  const r = spawnSync('bash', ['-c', script], {
    env: sandboxEnv(sb),
    encoding: 'utf8',
    timeout: 60_000,
    killSignal: 'SIGKILL',
  })
  return { head: r.stdout, stderr: readFileSync(errFile, 'utf8'), status: r.stderr.trim() }
}

void test('routes list | head -1 prints the first line and nothing on stderr, exit 141', () => {
  const r = piped('routes list')
  assert.match(r.head, /^HOST/)
  assert.equal(r.stderr, '')
  assert.equal(r.status, 'status 141')
})

void test('routes list --json | head -1 ends as quietly', () => {
  const r = piped('routes list --json')
  assert.equal(r.stderr, '')
  assert.equal(r.status, 'status 141')
})
