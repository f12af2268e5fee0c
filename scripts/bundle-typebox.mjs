// Part of `npm run build`, after tsc: replaces dist/src/domain/typebox.js
// (which imports TypeBox's some 700 ES modules) with one file holding
// them, so a start loads TypeBox in a few tens of milliseconds instead of
// about half a second of CPU (design §4.4). Without esbuild (a
// node_modules from before it was a dependency) the build goes on with the
// unbundled file, says so, and test/build/typebox-bundle.test.js fails
// until `npm ci` installs it.
import fs from 'node:fs'
import path from 'node:path'
import process from 'node:process'
import { fileURLToPath } from 'node:url'

const file = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'src', 'domain', 'typebox.js')
let esbuild
try {
  esbuild = await import('esbuild')
} catch {
  process.stderr.write(
    `bundle-typebox: esbuild is not installed (run \`npm ci\`); ${file} left unbundled: a start loads TypeBox module by module\n`,
  )
  process.exit(0)
}
const result = await esbuild.build({
  entryPoints: [file],
  outfile: file,
  allowOverwrite: true,
  bundle: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  legalComments: 'eof',
  banner: {
    js: '// TypeBox bundled whole by scripts/bundle-typebox.mjs (npm run build): one file to load, not some 700.',
  },
  logLevel: 'warning',
})
if (result.errors.length > 0) process.exit(1)
process.stdout.write(`bundle-typebox: ${file} (${Math.round(fs.statSync(file).size / 1024)} KiB)\n`)
