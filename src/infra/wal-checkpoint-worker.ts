// The checkpoint thread itself (wal-checkpointer.ts): asked, it opens its own connection, checkpoints PASSIVE
// (waiting on no one), closes it and answers the pages copied. Never left open: the last to close must be the agent's.
import { parentPort, workerData } from 'node:worker_threads'
import Database from 'better-sqlite3'
import { errorMessage } from '../errors.js'
import { CHECKPOINT_NICE, type CheckpointReply, type CheckpointThreadData } from './wal-checkpointer.js'
import { niceThisThread } from '../thread-nice.js'

const data = workerData as CheckpointThreadData

// Niced, so the loop's thread wins a shared core.
niceThisThread(CHECKPOINT_NICE)

function checkpoint(): CheckpointReply {
  let db: Database.Database | undefined
  try {
    db = new Database(data.file, { fileMustExist: true })
    db.pragma(`synchronous = ${data.synchronous}`)
    db.pragma('wal_autocheckpoint = 0')
    const row = db.pragma('wal_checkpoint(PASSIVE)') as Array<{ log: number; checkpointed: number }>
    const { log, checkpointed } = row[0] ?? { log: 0, checkpointed: 0 }
    return { log, checkpointed }
  } catch (err) {
    return { error: errorMessage(err) }
  } finally {
    db?.close()
  }
}

parentPort?.on('message', () => parentPort?.postMessage(checkpoint()))
