// The thread preflight's walks run on (preflight-pool.ts). It is handed a
// list of sources, walks each in one go and answers what it found for
// each, in order; a walk that fails is answered as its error, and the
// others go on. Or a batch's moves, and looks at each (mover.ts
// lookAtMove). It answers nothing else: nothing waits on it but the pass.
import fs from 'node:fs'
import os from 'node:os'
import { parentPort } from 'node:worker_threads'
import { errorMessage } from '../../errors.js'
import type { Dirs } from '../../domain/paths.js'
import { lookAtMove, type LookRequest } from './mover.js'
import { WALK_NICE, type LookAnswer, type WalkAnswer, type WalkReply, type WalkRequest } from './preflight-pool.js'
import { preflightSync } from './preflight.js'

// This thread alone is niced (Linux's setpriority takes a thread's id, and
// /proc/thread-self names it): when the walk and the loop's thread want the
// same core, the loop, which answers the activator, has it.
try {
  const tid = Number(fs.readlinkSync('/proc/thread-self').split('/').pop())
  if (Number.isInteger(tid) && tid > 0) os.setPriority(tid, WALK_NICE)
} catch {
  // Not Linux, or no /proc: the walk runs at the process's priority.
}

function answer(dir: string): WalkAnswer {
  try {
    return preflightSync(dir)
  } catch (err) {
    return { kind: 'error', message: errorMessage(err) }
  }
}

function look(dirs: Dirs, req: LookRequest): LookAnswer {
  try {
    return lookAtMove(dirs, req)
  } catch (err) {
    return { kind: 'error', message: errorMessage(err) }
  }
}

parentPort?.on('message', (req: WalkRequest) => {
  const reply: WalkReply =
    req.kind === 'walk'
      ? { id: req.id, found: req.dirs.map(answer) }
      : { id: req.id, looked: req.looks.map((l) => look(req.dirs, l)) }
  parentPort?.postMessage(reply)
})
