// The build's steps after tsc (`npm run build`). tsc builds incrementally
// into dist/ (its build info is dist/.tsbuildinfo), so dist/ is never
// deleted; instead this removes what tsc emitted for a source that is gone
// (a deleted or renamed .ts, which would otherwise still run as a test or
// be imported), copies the console page's files beside its route, and
// bundles TypeBox.
//
// TypeBox: dist/src/domain/typebox.js becomes one file holding TypeBox's
// some 700 ES modules, so a start loads TypeBox in a few tens of
// milliseconds instead of about half a second of CPU (design §4.4). It is
// bundled from the source each build, not from tsc's output, which an
// incremental build may leave as the last bundle. Without esbuild (a
// node_modules from before it was a dependency) the build goes on with
// tsc's file, says so, and test/domain/typebox.test.ts fails until
// `npm ci` installs it.
import fs from 'node:fs'
import path from 'node:path'
import process from 'node:process'
import { fileURLToPath } from 'node:url'

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..')
const dist = path.join(root, 'dist')

/** dist/<dir>/x.js and x.js.map whose source <dir>/x.ts (or x.js) is gone. */
function pruneStale() {
  const gone = []
  for (const top of ['src', 'test', 'bench']) {
    const out = path.join(dist, top)
    if (!fs.existsSync(out)) continue
    for (const entry of fs.readdirSync(out, { recursive: true, withFileTypes: true })) {
      if (!entry.isFile()) continue
      const m = /^(.*)\.js(\.map)?$/.exec(entry.name)
      if (m === null) continue
      const rel = path.relative(dist, path.join(entry.parentPath, m[1]))
      // A .js source (the console page's script) is copied, not compiled.
      if (fs.existsSync(path.join(root, `${rel}.ts`)) || fs.existsSync(path.join(root, `${rel}.js`))) continue
      fs.rmSync(path.join(entry.parentPath, entry.name))
      gone.push(path.join('dist', path.relative(dist, path.join(entry.parentPath, entry.name))))
    }
  }
  if (gone.length > 0) process.stdout.write(`build: removed ${gone.join(', ')}: their sources are gone\n`)
}

function copyConsolePage() {
  fs.cpSync(path.join(root, 'src/routes/console-page'), path.join(dist, 'src/routes/console-page'), { recursive: true })
}

async function bundleTypebox() {
  const file = path.join(dist, 'src/domain/typebox.js')
  let esbuild
  try {
    esbuild = await import('esbuild')
  } catch {
    process.stderr.write(
      `build: esbuild is not installed (run \`npm ci\`); ${file} left unbundled: a start loads TypeBox module by module\n`,
    )
    return true
  }
  const result = await esbuild.build({
    entryPoints: [path.join(root, 'src/domain/typebox.ts')],
    outfile: file,
    allowOverwrite: true,
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node24',
    legalComments: 'eof',
    banner: {
      js: '// TypeBox bundled whole by scripts/after-tsc.mjs (npm run build): one file to load, not some 700.',
    },
    logLevel: 'warning',
  })
  return result.errors.length === 0
}

pruneStale()
copyConsolePage()
if (!(await bundleTypebox())) process.exit(1)
