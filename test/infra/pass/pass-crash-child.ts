// The child of pass-crash.test.ts: a converge to nested on the data dir in
// PASS_CRASH_DATA, with CARLOS_FAILPOINT killing it (SIGKILL) at a step.
// Without the variable it does nothing.
import path from 'node:path'
import { FenceTable } from '../../../src/domain/fence.js'
import { systemClock } from '../../../src/domain/ports.js'
import { failpointFrom } from '../../../src/infra/failpoint.js'
import { Pass } from '../../../src/infra/pass/pass.js'
import { Registry } from '../../../src/infra/registry.js'

const dataDir = process.env.PASS_CRASH_DATA
if (dataDir !== undefined) {
  const registry = Registry.open(dataDir)
  const quiet = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} }
  const pass = new Pass({
    dirs: { dataDir, runDir: path.join(dataDir, 'run') },
    registry,
    fence: new FenceTable(),
    claims: { claimed: () => false, stop: () => Promise.resolve(true) },
    gate: { check: () => null },
    logger: quiet,
    clock: systemClock,
    graceMs: 3_600_000,
    socketsGid: () => Promise.resolve(-1),
    batchSize: Number(process.env.PASS_CRASH_BATCH ?? 128),
    failpoint: failpointFrom(process.env.CARLOS_FAILPOINT ?? ''),
  })
  await pass.recover('nested')
  await pass.converge('nested', { deferAwake: true, signal: new AbortController().signal })
  registry.close()
}
