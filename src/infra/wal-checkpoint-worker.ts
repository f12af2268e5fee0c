// The checkpoint thread itself (wal-checkpointer.ts): asked, it opens a
// connection of its own to the registry, copies the WAL back into the
// database PASSIVE (it waits for no reader or writer: the pages it cannot
// copy yet wait for the next request), closes it, and answers the pages it
// copied. Never left open between checkpoints: a connection of this thread
// still open when the agent's close would be the last, and make the
// closing checkpoint (and its fsyncs) as the agent stops.
import { parentPort, workerData } from 'node:worker_threads'
import Database from 'better-sqlite3'
import { errorMessage } from '../errors.js'
import { CHECKPOINT_NICE, type CheckpointReply, type CheckpointThreadData } from './wal-checkpointer.js'
import { niceThisThread } from '../thread-nice.js'

const data = workerData as CheckpointThreadData

// Niced: when it and the loop's thread want the same core, the loop, which answers the activator, has it.
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
