// The environment, as one TypeBox schema. Every CARLOS_* variable of DESIGN
// is here; a value the schema refuses stops the agent at boot with a
// message that names the variable and the value.
import os from 'node:os'
import path from 'node:path'
import Type, { type Static } from 'typebox'
import Value from 'typebox/value'

const DURATION = '^[0-9]+(ms|s|m|h)$'
const duration = (dflt: string, description: string) =>
  Type.String({ pattern: DURATION, default: dflt, description: `${description} Written 500ms, 5s, 10m, 1h.` })

export const EnvSchema = Type.Object({
  CARLOS_BOX: Type.Optional(Type.String({ minLength: 1, description: "The box's label; default the hostname." })),
  CARLOS_DATA_DIR: Type.String({ minLength: 1, default: './data', description: "The box's data root." }),
  CARLOS_RUN_DIR: Type.Optional(Type.String({ minLength: 1, description: 'Where flat sockets live; default <data>/run.' })),
  CARLOS_BUILD: Type.String({ default: '', description: 'The running platform build, stamped by the deployment.' }),
  // Not validated: an invalid value is reported, not refused (seed layoutDefault).
  CARLOS_LAYOUT_DEFAULT: Type.String({ default: '', description: 'nested (default) or flat: the layout when no intent is recorded.' }),
  CARLOS_LAYOUT_POLL: duration('5s', 'How often the deploy store is read for a new intent.'),
  CARLOS_LAYOUT_RETRY: duration('10m', 'When the leg runs again on its own after deferring or holding a host.'),
  CARLOS_LAYOUT_AWAKE_GRACE: duration('1h', 'How long an awake instance is waited for before it is stopped for its move.'),
  CARLOS_NESTED_MOUNTS: Type.Optional(
    Type.String({ description: 'Comma-separated mounts that must carry nosymfollow; default <data>/nested; `none` on a machine without them.' }),
  ),
  CARLOS_MOUNTINFO: Type.String({ default: '/proc/self/mountinfo', description: 'The mount table the gate reads.' }),
  CARLOS_PROBE_FILE: Type.String({ default: '/run/carlos-control/probe.out', description: "The isolation probe's verdict file." }),
  CARLOS_PROBE_EVERY: duration('5m', 'How often the probe verdict is read.'),
  CARLOS_AGENT_LISTEN: Type.String({ pattern: '^(\\[[0-9a-fA-F:.]+\\]|[A-Za-z0-9.-]+):[0-9]{1,5}$', default: '127.0.0.1:9740', description: 'host:port the HTTP API listens on.' }),
  CARLOS_AGENT_TOKEN: Type.String({ default: '', description: 'Bearer token mutating endpoints require; empty: loopback only.' }),
  CARLOS_ACTIVATOR: Type.Union([Type.Literal('claims'), Type.Literal('none')], { default: 'claims', description: 'claims: the wake-claim contract; none: no pass, nothing moves.' }),
  CARLOS_ACTIVATOR_URL: Type.String({ default: '', description: 'The activator, asked to stop instances.' }),
  CARLOS_EDGE_RELOAD_URL: Type.String({ default: '', description: 'POSTed after moves so the edge reloads its routes; optional.' }),
  CARLOS_DEPLOYMENT_DIR: Type.String({ minLength: 1, default: './deploy', description: 'The directory deploy store.' }),
  CARLOS_DEPLOYMENT_ETCD: Type.String({ default: '', description: 'Comma-separated etcd endpoints; when set, the deploy store.' }),
  CARLOS_LOG_LEVEL: Type.Union(
    [
      Type.Literal('trace'),
      Type.Literal('debug'),
      Type.Literal('info'),
      Type.Literal('warn'),
      Type.Literal('error'),
      Type.Literal('fatal'),
      Type.Literal('silent'),
    ],
    { default: 'info', description: 'pino log level.' },
  ),
  CARLOS_FAILPOINT: Type.String({ default: '', description: 'Tests only: exit abruptly at the named step of a move.' }),
})
export type Env = Static<typeof EnvSchema>

/** The agent's configuration, resolved from the environment. */
export interface Config {
  box: string
  dataDir: string
  runDir: string
  build: string
  layoutDefault: string
  pollMs: number
  retryMs: number
  graceMs: number
  nestedMounts: string[]
  mountinfo: string
  probeFile: string
  probeEveryMs: number
  listen: { host: string; port: number }
  token: string
  activator: 'claims' | 'none'
  activatorUrl: string
  edgeReloadUrl: string
  deploymentDir: string
  etcdEndpoints: string[]
  logLevel: string
  failpoint: string
}

export class ConfigError extends Error {
  override name = 'ConfigError'
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }

/** Parses `500ms`, `5s`, `10m`, `1h`; throws naming the variable. */
export function parseDuration(name: string, v: string): number {
  const m = /^([0-9]+)(ms|s|m|h)$/.exec(v)
  const unit = m?.[2]
  if (!m || unit === undefined) throw new ConfigError(`${name}=${JSON.stringify(v)} is not a duration (write 500ms, 5s, 10m, 1h)`)
  const ms = Number(m[1]) * (UNIT_MS[unit] ?? 1)
  if (!Number.isSafeInteger(ms) || ms <= 0) throw new ConfigError(`${name}=${JSON.stringify(v)} must be a positive duration`)
  return ms
}

function parseListen(v: string): { host: string; port: number } {
  const i = v.lastIndexOf(':')
  const host = v.slice(0, i).replace(/^\[(.*)\]$/, '$1')
  const port = Number(v.slice(i + 1))
  if (port < 1 || port > 65535) throw new ConfigError(`CARLOS_AGENT_LISTEN=${JSON.stringify(v)}: port ${port} is out of range`)
  return { host, port }
}

function parseEndpoints(v: string): string[] {
  const eps = v.split(',').map((s) => s.trim()).filter(Boolean)
  for (const ep of eps) {
    let u: URL
    try {
      u = new URL(ep)
    } catch {
      throw new ConfigError(`CARLOS_DEPLOYMENT_ETCD: ${JSON.stringify(ep)} is not a URL`)
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new ConfigError(`CARLOS_DEPLOYMENT_ETCD: ${JSON.stringify(ep)} is not http(s)`)
  }
  return eps
}

/**
 * The mounts the gate wants nosymfollow on. Empty counts as unset, as for
 * every variable (an env file's `CARLOS_NESTED_MOUNTS=` must not switch the
 * check off); only the word `none` says no mount is required.
 */
function nestedMounts(v: string | undefined, dataDir: string): string[] {
  if (v === undefined) return [path.join(dataDir, 'nested')]
  if (v.trim() === 'none') return []
  const mounts = v.split(',').map((s) => s.trim()).filter(Boolean)
  if (mounts.includes('none')) throw new ConfigError(`CARLOS_NESTED_MOUNTS=${JSON.stringify(v)}: none stands alone`)
  return mounts.map((p) => path.resolve(p))
}

function checkUrl(name: string, v: string): string {
  if (v === '') return v
  try {
    const u = new URL(v)
    if (u.protocol === 'http:' || u.protocol === 'https:') return v
  } catch {
    // reported below
  }
  throw new ConfigError(`${name}=${JSON.stringify(v)} is not an http(s) URL`)
}

/**
 * Reads the configuration from an environment. Only CARLOS_* keys are read;
 * an empty variable counts as unset. Throws ConfigError naming the first
 * variable it refuses.
 */
export function loadConfig(environ: NodeJS.ProcessEnv = process.env): Config {
  const raw: Record<string, string> = {}
  for (const key of Object.keys(EnvSchema.properties)) {
    const v = environ[key]
    if (v !== undefined && v !== '') raw[key] = v
  }
  const env = Value.Default(EnvSchema, raw) as Record<string, unknown>
  for (const err of Value.Errors(EnvSchema, env)) {
    const name = err.instancePath.replace(/^\//, '')
    throw new ConfigError(`${name}=${JSON.stringify(raw[name] ?? '')} is refused: ${err.message}`)
  }
  const e = env as Env
  const dataDir = path.resolve(e.CARLOS_DATA_DIR)
  return {
    box: e.CARLOS_BOX ?? os.hostname(),
    dataDir,
    runDir: path.resolve(e.CARLOS_RUN_DIR ?? path.join(dataDir, 'run')),
    build: e.CARLOS_BUILD,
    layoutDefault: e.CARLOS_LAYOUT_DEFAULT,
    pollMs: parseDuration('CARLOS_LAYOUT_POLL', e.CARLOS_LAYOUT_POLL),
    retryMs: parseDuration('CARLOS_LAYOUT_RETRY', e.CARLOS_LAYOUT_RETRY),
    graceMs: parseDuration('CARLOS_LAYOUT_AWAKE_GRACE', e.CARLOS_LAYOUT_AWAKE_GRACE),
    nestedMounts: nestedMounts(e.CARLOS_NESTED_MOUNTS, dataDir),
    mountinfo: e.CARLOS_MOUNTINFO,
    probeFile: e.CARLOS_PROBE_FILE,
    probeEveryMs: parseDuration('CARLOS_PROBE_EVERY', e.CARLOS_PROBE_EVERY),
    listen: parseListen(e.CARLOS_AGENT_LISTEN),
    token: e.CARLOS_AGENT_TOKEN,
    activator: e.CARLOS_ACTIVATOR,
    activatorUrl: checkUrl('CARLOS_ACTIVATOR_URL', e.CARLOS_ACTIVATOR_URL),
    edgeReloadUrl: checkUrl('CARLOS_EDGE_RELOAD_URL', e.CARLOS_EDGE_RELOAD_URL),
    deploymentDir: path.resolve(e.CARLOS_DEPLOYMENT_DIR),
    etcdEndpoints: parseEndpoints(e.CARLOS_DEPLOYMENT_ETCD),
    logLevel: e.CARLOS_LOG_LEVEL,
    failpoint: e.CARLOS_FAILPOINT,
  }
}
