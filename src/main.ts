// The entry point of `layoutd`: runs the dispatcher and exits with its status (design §8).
// A reader that goes away (`| head -1`) ends the command quietly, with 141 (SIGPIPE).
import { endQuietlyWhenReaderGoes, READER_GONE_STATUS } from './cli/command.js'
import { dispatch } from './cli/dispatch.js'

const readerGone = endQuietlyWhenReaderGoes([process.stdout, process.stderr])
const status = await dispatch(process.argv.slice(2), {
  environ: process.env,
  stdout: process.stdout,
  stderr: process.stderr,
  readerGone,
})
process.exitCode = status === 0 && readerGone.aborted ? READER_GONE_STATUS : status
// The EPIPE of the last write may come a turn after the command answered.
readerGone.addEventListener('abort', () => {
  if (process.exitCode === 0) process.exitCode = READER_GONE_STATUS
})
