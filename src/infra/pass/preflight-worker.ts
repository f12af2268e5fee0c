// The thread preflight's walks run on (preflight-pool.ts). It is handed a
// list of sources, walks each in one go and answers what it found for
// each, in order; a walk that fails is answered as its error, and the
// others go on. It answers nothing else: nothing waits on it but the pass.
import { parentPort } from 'node:worker_threads'
import { errorMessage } from '../../errors.js'
import type { WalkAnswer, WalkReply, WalkRequest } from './preflight-pool.js'
import { preflightSync } from './preflight.js'

function answer(dir: string): WalkAnswer {
  try {
    return preflightSync(dir)
  } catch (err) {
    return { kind: 'error', message: errorMessage(err) }
  }
}

parentPort?.on('message', (req: WalkRequest) => {
  const reply: WalkReply = { id: req.id, found: req.dirs.map(answer) }
  parentPort?.postMessage(reply)
})
