// The environment (design §8): every CARLOS_* variable in one table with its
// default, meaning and parser; `Config` is derived from it, so they cannot
// drift. Plain functions, not a schema checker: every command loads this file.
import os from 'node:os'
import path from 'node:path'
import { durationMs } from './domain/duration.js'
import { hostError } from './domain/hostname.js'
import { placeableBuild } from './domain/release.js'
import { errors } from './errors.js'

interface Variable<T> {
  env: string
  description: string
  /** A function where the default lives under the data dir. */
  fallback: string | ((dataDir: string) => string)
  /** Throws refused()'s ConfigError on a bad value. */
  decode: (text: string, env: string) => T
  /** Where decoding the fallback would misread it (a data dir with a comma). */
  unset?: (dataDir: string) => T
}

function variable<T>(
  env: string,
  fallback: Variable<T>['fallback'],
  description: string,
  decode: Variable<T>['decode'],
  unset?: Variable<T>['unset'],
): Variable<T> {
  return unset === undefined ? { env, fallback, description, decode } : { env, fallback, description, decode, unset }
}

/** Quoted only where it would not read on its own. */
function shown(text: string): string {
  return /^[\x21-\x7e]+$/.test(text) && !/["'\\]/.test(text) ? text : JSON.stringify(text)
}

/** The one refusal: `NAME=value: what is wanted`. */
export function refused(env: string, text: string, wanted: string) {
  return errors.config(`${env}=${shown(text)}: ${wanted}`)
}

/** Names a secret's length, never its value: a boot error ends up in logs and tickets. */
function refusedSecret(env: string, text: string, wanted: string) {
  return errors.config(`${env}=(hidden, ${Buffer.byteLength(text)} bytes): ${wanted}`)
}

const text = (v: string): string => v

/** A hostname (design §1), folded to lower case as `intent --box` folds it. */
function boxLabel(v: string, env: string): string {
  const label = v.toLowerCase()
  const why = hostError(label)
  if (why !== null)
    throw refused(env, v, `a box label, as a hostname is (${why.replace(/^hostname /, '')}); set CARLOS_BOX`)
  return label
}
const absolute = (v: string): string => path.resolve(v)
/** A file, made absolute; empty: not set. */
const optionalFile = (v: string): string => (v === '' ? '' : path.resolve(v))

/** etcd's user name; empty: no auth. */
function etcdUser(v: string, env: string): string {
  if (v !== '' && !/^[\x21-\x7e]{1,128}$/.test(v))
    throw refused(env, v, 'an etcd user name: 1 to 128 visible ASCII characters, no space')
  return v
}

/** The one duration rule (src/domain/duration.ts), above zero; in milliseconds. */
export function parseDuration(v: string, env: string): number {
  const ms = durationMs(v)
  if (ms === null) throw refused(env, v, 'a duration like 500ms, 5s, 10m, 1h')
  if (!Number.isSafeInteger(ms) || ms <= 0) throw refused(env, v, 'a duration above zero, like 500ms, 5s, 10m, 1h')
  return ms
}

function oneOf<const T extends string>(...allowed: T[]) {
  return (v: string, env: string): T => {
    if ((allowed as string[]).includes(v)) return v as T
    throw refused(env, v, `one of ${allowed.join(', ')}`)
  }
}

function listenAddress(v: string, env: string): { host: string; port: number } {
  if (!/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}$/.test(v))
    throw refused(env, v, 'host:port, like 127.0.0.1:9740 or [::1]:9740')
  const i = v.lastIndexOf(':')
  const port = Number(v.slice(i + 1))
  if (port < 1 || port > 65535) throw refused(env, v, `port ${port} is out of range`)
  return { host: v.slice(0, i).replace(/^\[(.*)\]$/, '$1'), port }
}

function isHttp(v: string): boolean {
  try {
    const u = new URL(v)
    return u.protocol === 'http:' || u.protocol === 'https:'
  } catch {
    return false
  }
}

/** An http(s) URL, or empty: not set. */
function httpUrl(v: string, env: string): string {
  if (v !== '' && !isHttp(v)) throw refused(env, v, 'an http(s) URL')
  return v
}

/** Refused, unshown: endpoints are printed everywhere (design §7.1). */
function refuseUserinfo(v: string, env: string): void {
  if (!v.includes('@')) return
  throw errors.config(
    `${env}=(hidden: an endpoint holds user@ or user:password@): write the endpoint without it ` +
      '(http://host:2379), and give the user in CARLOS_ETCD_USER and the password in the file ' +
      'CARLOS_ETCD_PASSWORD_FILE names',
  )
}

/** Comma-separated http(s) endpoints; empty: none. */
function endpoints(v: string, env: string): string[] {
  refuseUserinfo(v, env)
  const eps = v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
  const bad = eps.find((ep) => !isHttp(ep))
  if (bad !== undefined) throw refused(env, v, `${JSON.stringify(bad)} is not an http(s) URL`)
  return eps
}

/** Empty is unset, so an env file's `CARLOS_NESTED_MOUNTS=` cannot switch the check off; only `none` does. */
function mounts(v: string, env: string): string[] {
  if (v.trim() === 'none') return []
  const list = v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
  if (list.includes('none')) throw refused(env, v, 'none stands alone')
  return list.map((p) => path.resolve(p))
}

/** Anything shorter is a placeholder or a typo, not a secret. */
export const MIN_TOKEN_BYTES = 16

/** What is wrong with a bearer token, or null. */
export function tokenProblem(v: string): string | null {
  if (!/^[\x21-\x7e]+$/.test(v))
    return 'one word of visible ASCII (no space, tab or newline), as an Authorization header carries it'
  if (Buffer.byteLength(v) < MIN_TOKEN_BYTES) return `a bearer token of at least ${MIN_TOKEN_BYTES} bytes`
  return null
}

/** Empty: none given here (design §6). */
function bearerToken(v: string, env: string): string {
  if (v === '') return v
  const problem = tokenProblem(v)
  if (problem !== null) throw refusedSecret(env, v, problem)
  return v
}

const LOG_LEVELS = oneOf('trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent')

/** By Config field; the data dir first, as other defaults live under it. */
export const ENVIRONMENT = {
  dataDir: variable('CARLOS_DATA_DIR', './data', "The box's data root.", absolute),
  box: variable(
    'CARLOS_BOX',
    () => os.hostname(),
    "The box's label, a hostname (upper case folded); default the hostname.",
    boxLabel,
  ),
  runDir: variable(
    'CARLOS_RUN_DIR',
    (d) => path.join(d, 'run'),
    'Where flat sockets live; default <data>/run.',
    absolute,
  ),
  // Never refused: an unplaceable build passes the floor with a warning (design §5.2).
  build: variable(
    'CARLOS_BUILD',
    '',
    'The running platform build, stamped by the deployment: a version (v0.25.0), a commit id, or dev.',
    text,
  ),
  // Not refused here: the layout default's rule reports it (design §5).
  layoutDefault: variable(
    'CARLOS_LAYOUT_DEFAULT',
    '',
    'nested (default) or flat: the layout when no intent is recorded.',
    text,
  ),
  pollMs: variable('CARLOS_LAYOUT_POLL', '5s', 'How often the deploy store is read for a new intent.', parseDuration),
  retryMs: variable(
    'CARLOS_LAYOUT_RETRY',
    '10m',
    'When the leg runs again on its own after deferring or holding a host.',
    parseDuration,
  ),
  graceMs: variable(
    'CARLOS_LAYOUT_AWAKE_GRACE',
    '1h',
    'How long an awake instance is waited for before it is stopped for its move.',
    parseDuration,
  ),
  nestedMounts: variable(
    'CARLOS_NESTED_MOUNTS',
    (d) => d,
    'Comma-separated mounts that must carry nosymfollow; default <data> (flat and nested on one mount, ' +
      'so a move can rename); `none` on a machine without them.',
    mounts,
    (d) => [d],
  ),
  mountinfo: variable('CARLOS_MOUNTINFO', '/proc/self/mountinfo', 'The mount table the gate reads.', text),
  probeFile: variable(
    'CARLOS_PROBE_FILE',
    '/run/carlos-control/probe.out',
    "The isolation probe's verdict file.",
    text,
  ),
  probeEveryMs: variable('CARLOS_PROBE_EVERY', '5m', 'How often the probe verdict is read.', parseDuration),
  listen: variable('CARLOS_AGENT_LISTEN', '127.0.0.1:9740', 'host:port the HTTP API listens on.', listenAddress),
  token: variable(
    'CARLOS_AGENT_TOKEN',
    '',
    'Bearer token every mutation requires, at least 16 bytes; empty: the file CARLOS_AGENT_TOKEN_FILE names, ' +
      'else <data>/agent.token (made at first start, 0600).',
    bearerToken,
  ),
  tokenFile: variable(
    'CARLOS_AGENT_TOKEN_FILE',
    '',
    'A file holding the bearer token (when CARLOS_AGENT_TOKEN is unset); not readable by others.',
    optionalFile,
  ),
  activator: variable(
    'CARLOS_ACTIVATOR',
    'claims',
    'claims: the wake-claim contract; none: no pass, nothing moves.',
    oneOf('claims', 'none'),
  ),
  activatorUrl: variable('CARLOS_ACTIVATOR_URL', '', 'The activator, asked to stop instances.', httpUrl),
  edgeReloadUrl: variable(
    'CARLOS_EDGE_RELOAD_URL',
    '',
    'POSTed after moves so the edge reloads its routes; optional.',
    httpUrl,
  ),
  deploymentDir: variable('CARLOS_DEPLOYMENT_DIR', './deploy', 'The directory deploy store.', absolute),
  etcdEndpoints: variable(
    'CARLOS_DEPLOYMENT_ETCD',
    '',
    'Comma-separated etcd endpoints; when set, the deploy store.',
    endpoints,
  ),
  etcdCa: variable(
    'CARLOS_ETCD_CA',
    '',
    "The CA file etcd's server certificates are checked against; endpoints must then be https.",
    optionalFile,
  ),
  etcdCert: variable(
    'CARLOS_ETCD_CERT',
    '',
    'The client certificate file shown to etcd (with CARLOS_ETCD_KEY); endpoints must then be https.',
    optionalFile,
  ),
  etcdKey: variable('CARLOS_ETCD_KEY', '', "The client certificate's key file.", optionalFile),
  etcdUser: variable(
    'CARLOS_ETCD_USER',
    '',
    "etcd's user layoutd authenticates as (with CARLOS_ETCD_PASSWORD_FILE); empty: no etcd auth.",
    etcdUser,
  ),
  etcdPasswordFile: variable(
    'CARLOS_ETCD_PASSWORD_FILE',
    '',
    "The file holding CARLOS_ETCD_USER's password (never the password itself).",
    optionalFile,
  ),
  etcdWatchSilenceMs: variable(
    'CARLOS_ETCD_WATCH_SILENCE',
    '5s',
    'A watch stream silent this long (no event, progress or answer) is dropped and made again.',
    parseDuration,
  ),
  etcdBoxTtlMs: variable(
    'CARLOS_ETCD_BOX_TTL',
    '30s',
    "The lease of this box's summary and label in etcd: a box that dies leaves the fleet's view after it, " +
      'and its label is free.',
    parseDuration,
  ),
  logLevel: variable('CARLOS_LOG_LEVEL', 'info', 'pino log level.', LOG_LEVELS),
  failpoint: variable(
    'CARLOS_FAILPOINT',
    '',
    'Tests only: at the named step of a move, exit abruptly (step) or fail with an errno (step=ENOSPC); ' +
      "skip-fsync:NAME takes one of the move's fsyncs out.",
    text,
  ),
}

type Environment = typeof ENVIRONMENT

/** One field per variable of ENVIRONMENT. */
export type Config = { [K in keyof Environment]: ReturnType<Environment[K]['decode']> }

/** Empty counts as unset; refuses the first bad variable in the table's order. */
export function loadConfig(environ: NodeJS.ProcessEnv = process.env): Config {
  const valueOf = (v: Variable<unknown>, dataDir: string): unknown => {
    const set = environ[v.env]
    if (set !== undefined && set !== '') return v.decode(set, v.env)
    if (v.unset !== undefined) return v.unset(dataDir)
    return v.decode(typeof v.fallback === 'string' ? v.fallback : v.fallback(dataDir), v.env)
  }
  refuseMisspelt(environ)
  const dataDir = valueOf(ENVIRONMENT.dataDir, '') as string
  const config: Record<string, unknown> = {}
  for (const [field, v] of Object.entries(ENVIRONMENT) as Array<[keyof Environment, Variable<unknown>]>) {
    config[field] = valueOf(v, dataDir)
  }
  checkEtcdAccess(config as Config, environ)
  return config as Config
}

/** Warnings a start logs. */
export function configWarnings(config: Pick<Config, 'build'>): string[] {
  if (placeableBuild(config.build)) return []
  return [
    `CARLOS_BUILD=${shown(config.build)} cannot be placed against the layout floor ` +
      '(a version like v0.25.0, a commit id of 7 to 40 lower-case hex digits, or dev); it passes the floor as given',
  ]
}

/** CARLOS_* names others read: the activator's key in a tenant's `instance.env` (design §4.5). */
const OTHERS_VARIABLES: ReadonlySet<string> = new Set(['CARLOS_INSTANCE_KEY'])

const KNOWN_VARIABLES: ReadonlySet<string> = new Set([
  ...Object.values(ENVIRONMENT).map((v: Variable<unknown>) => v.env),
  ...OTHERS_VARIABLES,
])

/** Levenshtein, or limit + 1 once sure to exceed it. */
function editDistance(a: string, b: string, limit: number): number {
  if (Math.abs(a.length - b.length) > limit) return limit + 1
  let row = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const next = [i]
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      next.push(Math.min((row[j] ?? 0) + 1, (next[j - 1] ?? 0) + 1, (row[j - 1] ?? 0) + cost))
    }
    row = next
  }
  return row[b.length] ?? limit + 1
}

/** The known variable a name is a slip of: underscores aside, or two letters off. */
function meantFor(name: string): string | undefined {
  const squashed = name.replaceAll('_', '')
  for (const known of KNOWN_VARIABLES) {
    if (known.replaceAll('_', '') === squashed || editDistance(name, known, 2) <= 2) return known
  }
  return undefined
}

/** Unknown set CARLOS_* names, sorted. */
function unknownNames(environ: NodeJS.ProcessEnv): string[] {
  return Object.keys(environ)
    .filter((k) => k.startsWith('CARLOS_') && !KNOWN_VARIABLES.has(k) && (environ[k] ?? '') !== '')
    .sort()
}

/** A slip of a known name is refused (design §8), naming both. */
function refuseMisspelt(environ: NodeJS.ProcessEnv): void {
  for (const name of unknownNames(environ)) {
    const known = meantFor(name)
    if (known !== undefined)
      throw errors.config(`${name} is not a layoutd variable; did you mean ${known}? (unset ${name}, or rename it)`)
  }
}

/** Unknown names that are no slip: the agent names them at start. */
export function unknownVariables(environ: NodeJS.ProcessEnv = process.env): string[] {
  return unknownNames(environ).filter((name) => meantFor(name) === undefined)
}

/** The etcd variables that only make sense together (design §7.1). */
function checkEtcdAccess(c: Config, environ: NodeJS.ProcessEnv): void {
  if ((c.etcdCert === '') !== (c.etcdKey === '')) {
    const [set, unset] =
      c.etcdCert === '' ? ['CARLOS_ETCD_KEY', 'CARLOS_ETCD_CERT'] : ['CARLOS_ETCD_CERT', 'CARLOS_ETCD_KEY']
    throw refused(set, environ[set] ?? '', `a client certificate and its key go together; set ${unset} too`)
  }
  if ((c.etcdUser === '') !== (c.etcdPasswordFile === '')) {
    const [set, unset] =
      c.etcdUser === ''
        ? ['CARLOS_ETCD_PASSWORD_FILE', 'CARLOS_ETCD_USER']
        : ['CARLOS_ETCD_USER', 'CARLOS_ETCD_PASSWORD_FILE']
    throw refused(set, environ[set] ?? '', `an etcd user and its password file go together; set ${unset} too`)
  }
  if (c.etcdCert !== '' || c.etcdCa !== '') {
    const plain = c.etcdEndpoints.find((ep) => ep.startsWith('http:'))
    if (plain !== undefined) {
      throw refused(
        'CARLOS_DEPLOYMENT_ETCD',
        environ.CARLOS_DEPLOYMENT_ETCD ?? '',
        `${plain} is plain http while CARLOS_ETCD_CERT or CARLOS_ETCD_CA is set; write https://`,
      )
    }
  }
}
