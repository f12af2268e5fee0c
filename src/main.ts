// The entry point of `layoutd` (bin/layoutd, `npm start`): hands argv, the
// environment and the standard streams to the dispatcher, and exits with the
// status it answers (design §8).
import { dispatch } from './cli/dispatch.js'

process.exitCode = await dispatch(process.argv.slice(2), {
  environ: process.env,
  stdout: process.stdout,
  stderr: process.stderr,
})
