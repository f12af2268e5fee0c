// The thread preflight's walks run on (preflight-pool.ts). It is handed a
// list of sources, walks each in one go and answers what it found for
// each, in order; a walk that fails is answered as its error, and the
// others go on. Or a batch's moves, and looks at each (mover.ts
// lookAtMove). It answers nothing else: nothing waits on it but the pass.
import { parentPort } from 'node:worker_threads'
import { errorMessage } from '../../errors.js'
import { lookAtMove } from './mover.js'
import { WALK_NICE, type WalkReply, type WalkRequest } from './preflight-pool.js'
import { preflightSync } from './preflight.js'
import { niceThisThread } from '../../thread-nice.js'

// This thread alone is niced: when the walk and the loop's thread want the
// same core, the loop, which answers the activator, has it.
niceThisThread(WALK_NICE)

/** f's answer, or the error it threw as one (a walk or a look that fails fails alone). */
function answered<T>(f: () => T): T | { kind: 'error'; message: string } {
  try {
    return f()
  } catch (err) {
    return { kind: 'error', message: errorMessage(err) }
  }
}

parentPort?.on('message', (req: WalkRequest) => {
  const reply: WalkReply =
    req.kind === 'walk'
      ? { id: req.id, found: req.dirs.map((dir) => answered(() => preflightSync(dir))) }
      : { id: req.id, looked: req.looks.map((l) => answered(() => lookAtMove(req.dirs, l))) }
  parentPort?.postMessage(reply)
})
