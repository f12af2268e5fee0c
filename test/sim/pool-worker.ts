// A worker thread of the simulation pool (pool.ts): runs its range of seeds and posts the tally.
import { parentPort, workerData } from 'node:worker_threads'
import { runRange, type SeedRange } from './pool.js'

parentPort?.postMessage(await runRange(workerData as SeedRange))
