// The bearer token every mutation needs (design §6): CARLOS_AGENT_TOKEN, else the file CARLOS_AGENT_TOKEN_FILE
// names, else `D/agent.token`, which the agent makes (0600) at its first start. A token file others could read or
// replace is refused.
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { tokenProblem, type Config } from '../config.js'
import { errors } from '../errors.js'

export const AGENT_TOKEN_FILE = 'agent.token'

/** The token is never logged. */
export interface AgentToken {
  token: string
  /** `CARLOS_AGENT_TOKEN` or the file. */
  source: string
  configured: boolean
  made: boolean
}

/** The token, or why there is none (said beside a 401). */
export type ClientToken = { token: string } | { token: ''; missing: string }

/** A token file is one line. */
const MAX_FILE_BYTES = 4096

const MADE_BYTES = 32

/** `echo … > file` adds a newline. */
function tokenOf(text: string): string {
  return text.replace(/\r?\n$/, '')
}

function readOpen(fd: number, file: string, env: string): { text: string; stat: fs.Stats } {
  const stat = fs.fstatSync(fd)
  if (!stat.isFile()) throw errors.config(`${env}: ${file} is not a regular file; a token file is`)
  if (stat.size > MAX_FILE_BYTES)
    throw errors.config(`${env}: ${file} holds ${stat.size} bytes; a token file holds one token`)
  const buf = Buffer.alloc(stat.size)
  const n = fs.readSync(fd, buf, 0, buf.length, 0)
  return { text: buf.subarray(0, n).toString('utf8'), stat }
}

/** Names the length, never the text. */
function checkedToken(text: string, file: string, env: string): string {
  const token = tokenOf(text)
  const problem = tokenProblem(token)
  if (problem !== null)
    throw errors.config(`${env}: ${file} holds (hidden, ${Buffer.byteLength(token)} bytes), not ${problem}`)
  return token
}

const octal = (mode: number): string => `0${(mode & 0o777).toString(8)}`

/** May be a symlink and group-readable (how the activator gets it), never world-readable. */
function fromOperatorFile(file: string): AgentToken {
  const env = 'CARLOS_AGENT_TOKEN_FILE'
  let fd: number
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK)
  } catch (err) {
    throw errors.config(`${env}=${file}: cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`)
  }
  try {
    const { text, stat } = readOpen(fd, file, env)
    if ((stat.mode & 0o007) !== 0)
      throw errors.config(`${env}: ${file} is open to every user (mode ${octal(stat.mode)}); chmod o= ${file}`)
    return { token: checkedToken(text, file, env), source: file, configured: true, made: false }
  } finally {
    fs.closeSync(fd)
  }
}

/** O_NOFOLLOW and checked on the fd: a file another user could read or replace is no secret. */
function readOwnFile(file: string): string | undefined {
  const what = `the agent's token file`
  let fd: number
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ENOENT') return undefined
    if (code === 'ELOOP') throw errors.config(`${what} ${file} is a symlink; remove it (the agent makes the file)`)
    throw errors.config(`${what} ${file} cannot be read (${code ?? String(err)})`)
  }
  try {
    const { text, stat } = readOpen(fd, file, what)
    if ((stat.mode & 0o077) !== 0)
      throw errors.config(`${what} ${file} is open to other users (mode ${octal(stat.mode)}); chmod 600 ${file}`)
    const uid = process.geteuid?.()
    if (uid !== undefined && stat.uid !== uid)
      throw errors.config(`${what} ${file} belongs to uid ${stat.uid}, not to the agent's (${uid})`)
    return checkedToken(text, file, what)
  } finally {
    fs.closeSync(fd)
  }
}

/** An O_EXCL 0600 temp file, fsynced, link(2)ed: whole, never over another's; false when another start won. */
function makeOwnFile(file: string, token: string): boolean {
  const tmp = `${file}.${process.pid}.tmp`
  fs.rmSync(tmp, { force: true })
  const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants
  const fd = fs.openSync(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600)
  try {
    fs.fchmodSync(fd, 0o600)
    fs.writeSync(fd, `${token}\n`)
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
  try {
    fs.linkSync(tmp, file)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    return false
  } finally {
    fs.rmSync(tmp, { force: true })
  }
  const dir = fs.openSync(path.dirname(file), fs.constants.O_RDONLY | fs.constants.O_DIRECTORY)
  try {
    fs.fsyncSync(dir)
  } finally {
    fs.closeSync(dir)
  }
  return true
}

/** Made when absent; a ConfigError names the file, never the token. */
export function agentToken(config: Pick<Config, 'token' | 'tokenFile' | 'dataDir'>): AgentToken {
  if (config.token !== '') return { token: config.token, source: 'CARLOS_AGENT_TOKEN', configured: true, made: false }
  if (config.tokenFile !== '') return fromOperatorFile(config.tokenFile)
  const file = path.join(config.dataDir, AGENT_TOKEN_FILE)
  const kept = readOwnFile(file)
  if (kept !== undefined) return { token: kept, source: file, configured: false, made: false }
  const made = randomBytes(MADE_BYTES).toString('hex')
  if (makeOwnFile(file, made)) return { token: made, source: file, configured: false, made: true }
  const theirs = readOwnFile(file)
  if (theirs === undefined) throw errors.config(`the agent's token file ${file} vanished as it was made`)
  return { token: theirs, source: file, configured: false, made: false }
}

/** Read the same way, never made; unreadable is said, not thrown (reads need no token). */
export function clientToken(config: Pick<Config, 'token' | 'tokenFile' | 'dataDir'>): ClientToken {
  if (config.token !== '') return { token: config.token }
  const file = config.tokenFile !== '' ? config.tokenFile : path.join(config.dataDir, AGENT_TOKEN_FILE)
  let text: string
  try {
    text = fs.readFileSync(file, { encoding: 'utf8', flag: fs.constants.O_RDONLY | fs.constants.O_NONBLOCK })
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err)
    const how =
      config.tokenFile !== ''
        ? `CARLOS_AGENT_TOKEN_FILE=${file} cannot be read (${code})`
        : code === 'ENOENT'
          ? `${file} does not exist (the agent makes it at its first start)`
          : `${file} cannot be read by this user (${code}): run as the agent's user, or give ` +
            'CARLOS_AGENT_TOKEN_FILE or CARLOS_AGENT_TOKEN'
    return { token: '', missing: how }
  }
  const token = tokenOf(text)
  if (tokenProblem(token) !== null) return { token: '', missing: `${file} holds no usable token` }
  return { token }
}
