// The package's version, read from package.json at run time for `layoutd --version` and the OpenAPI document.
import { readFile } from 'node:fs/promises'

export async function packageVersion(): Promise<string> {
  // From <outDir>/src/infra/, three levels down.
  const pkg = JSON.parse(await readFile(new URL('../../../package.json', import.meta.url), 'utf8')) as {
    version?: unknown
  }
  if (typeof pkg.version !== 'string') throw new Error('package.json has no version')
  return pkg.version
}
