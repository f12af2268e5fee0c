// The files thread itself (files-thread.ts): it answers each request with
// what the move's file work (pass-files.ts) did, in the order asked, and
// answers nothing else. Its failpoints and the fsyncs a test takes out come
// from CARLOS_FAILPOINT, as the loop's thread's do; a failpoint that kills
// kills the process, as there.
import { parentPort, workerData } from 'node:worker_threads'
import { armSkippedFsyncs, failpointFrom } from '../failpoint.js'
import { FILES_NICE, type FilesReply, type FilesRequest, type FilesThreadData } from './files-thread.js'
import { fileError, filesWork } from './pass-files.js'
import { niceThisThread } from '../../thread-nice.js'

const data = workerData as FilesThreadData
armSkippedFsyncs(data.failpoint)
const work = filesWork(failpointFrom(data.failpoint), () => Promise.resolve())

// This thread alone is niced (as preflight's, preflight-worker.ts): when it
// and the loop's thread want the same core, the loop has it.
niceThisThread(FILES_NICE)

function run(req: FilesRequest): Promise<unknown> {
  switch (req.op) {
    case 'prepare':
      return work.prepare(req.dirs, req.items, req.gid)
    case 'fsync':
      return work.fsync(req.dirs)
    case 'rename':
      return work.rename(req.items)
  }
}

// Each request is answered as soon as its own calls are done; requests of
// two batches may be under way at once, as they are on the loop's thread,
// and the loop's thread sends a step's request only once the step before it
// has answered, so every host's calls stay in their order.
parentPort?.on('message', (req: FilesRequest) => {
  void run(req).then(
    (ok: unknown) => parentPort?.postMessage({ id: req.id, ok } satisfies FilesReply),
    (err: unknown) => parentPort?.postMessage({ id: req.id, err: fileError(err) } satisfies FilesReply),
  )
})
