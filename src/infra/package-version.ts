// The package's version, read from package.json at run time: `layoutd --version` prints it and the OpenAPI document
// carries it.
import { readFile } from 'node:fs/promises'

export async function packageVersion(): Promise<string> {
  // Compiled to <outDir>/src/infra/, three levels under the root.
  const pkg = JSON.parse(await readFile(new URL('../../../package.json', import.meta.url), 'utf8')) as {
    version?: unknown
  }
  if (typeof pkg.version !== 'string') throw new Error('package.json has no version')
  return pkg.version
}
