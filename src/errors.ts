// The one catalogue of coded errors, by area: code, HTTP status, message.
// The app answers {"error": {"code", "message"}} (design §6), a 500's message
// only logged; the CLI exits with exitStatusOf (design §8).

export class AppError extends Error {
  override name = 'AppError'
  constructor(
    readonly code: string,
    readonly statusCode: number,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options)
  }
}

/** Not a DNS name (design §2). */
export class InvalidHostError extends AppError {
  override name = 'InvalidHostError'
  constructor(
    readonly host: string,
    readonly why: string,
  ) {
    super('invalid_host', 400, `${JSON.stringify(host)} is not a valid hostname: ${why}`)
  }
}

/** The CLI exits 2 with the usage. */
export class UsageError extends AppError {
  override name = 'UsageError'
  constructor(message: string, options?: ErrorOptions) {
    super('usage', 400, message, options)
  }
}

/** The agent did not answer in HTTP JSON. */
export class AgentUnreachable extends AppError {
  override name = 'AgentUnreachable'
  constructor(message: string, options?: ErrorOptions) {
    super('agent_unreachable', 502, message, options)
  }
}

/** A refused environment value. */
export class ConfigError extends AppError {
  override name = 'ConfigError'
  constructor(message: string) {
    super('config_invalid', 500, message)
  }
}

/** Bad lines `routes import` describes, then numbers. */
const IMPORT_LINES_SHOWN = 20
const IMPORT_LINES_NUMBERED = 200

export const errors = {
  // A request the API refuses (design §6).
  badRequest: (message: string) => new AppError('bad_request', 400, message),
  unauthorized: (message: string) => new AppError('unauthorized', 401, message),
  forbidden: (message: string) => new AppError('forbidden', 403, message),
  notFound: (message: string) => new AppError('not_found', 404, message),
  noRoute: (method: string, path: string) => new AppError('not_found', 404, `no route for ${method} ${path}`),
  conflict: (message: string) => new AppError('conflict', 409, message),
  payloadTooLarge: (limit: number | undefined) =>
    new AppError('payload_too_large', 413, `the request body is larger than the limit of ${limit} bytes`),
  unsupportedMediaType: (contentType: string) =>
    new AppError(
      'unsupported_media_type',
      415,
      `content type ${JSON.stringify(contentType)} is not accepted; send application/json`,
    ),
  uriTooLong: (limit: number) =>
    new AppError('uri_too_long', 414, `a path parameter is longer than ${limit} bytes; no hostname is`),
  // Node's HTTP parser refuses these before any route.
  headersTooLarge: () =>
    new AppError('headers_too_large', 431, 'the request headers are larger than the server accepts'),
  requestTimeout: () => new AppError('request_timeout', 408, 'the request did not arrive whole in time'),
  bodiesOverBudget: (budget: number) =>
    new AppError(
      'bodies_over_budget',
      503,
      `the request bodies still arriving hold ${budget} bytes in all, the most the agent keeps: retry shortly`,
    ),
  malformedRequest: () => new AppError('bad_request', 400, 'the request is not well-formed HTTP/1.1'),
  invalidJson: () => new AppError('bad_request', 400, 'the request body is not valid JSON'),
  emptyJson: () =>
    new AppError('bad_request', 400, 'the request body is empty but its content type is application/json'),
  /** It keeps Fastify's status. */
  clientError: (status: number, message: string) =>
    new AppError(status === 400 ? 'bad_request' : 'client_error', status, message),

  // Hosts and the registry (design §2).
  invalidHost: (host: string, why: string) => new InvalidHostError(host, why),
  hostExists: (host: string) => new AppError('host_exists', 409, `host ${host} is already in the registry`),
  /** sun_path holds 108 bytes with its NUL (design §2). */
  socketTooLong: (host: string, which: string, socket: string, limit: number) =>
    new AppError(
      'socket_too_long',
      400,
      `refused: ${host}'s ${which} ${socket} is ${Buffer.byteLength(socket)} bytes, ` +
        `over the ${limit} a unix socket can bind`,
    ),
  /** Claimed paths (design §1.1 `conflict`, §8). */
  pathClaimed: (host: string, why: string, other: string) =>
    new AppError(
      'path_claimed',
      409,
      `refused: ${host}'s ${why}; remove or move ${other}'s row first, or give other paths`,
    ),
  /** `routes import` writes nothing unless every line is good (design §8). */
  importRefused: (file: string, bad: ReadonlyArray<{ line: number; why: string }>) => {
    const shown = bad.slice(0, IMPORT_LINES_SHOWN).map((b) => `\n  line ${b.line}: ${b.why}`)
    const rest = bad.slice(IMPORT_LINES_SHOWN, IMPORT_LINES_SHOWN + IMPORT_LINES_NUMBERED).map((b) => b.line)
    const more = bad.length - shown.length
    const tail =
      more === 0
        ? ''
        : `\n  … and ${more} more: ` +
          `line${more === 1 ? '' : 's'} ${rest.join(', ')}${more > rest.length ? ', …' : ''}`
    return new AppError(
      'import_refused',
      400,
      `refused ${file}: ${bad.length} bad line${bad.length === 1 ? '' : 's'}, ` +
        `nothing was written:${shown.join('')}${tail}`,
    )
  },
  importUnreadable: (file: string, cause: unknown) =>
    new AppError('import_unreadable', 400, `cannot read ${file}: ${errorMessage(cause)}; nothing was written`, {
      cause,
    }),
  /** The hostname rule (design §1). */
  invalidBoxLabel: (box: string, why: string) =>
    new AppError('invalid_box', 400, `--box ${JSON.stringify(box)} is not a box label: ${why}`),
  /** `intent --box` of an unknown box (design §7.3). */
  unknownBox: (box: string, known: number) =>
    new AppError(
      'unknown_box',
      409,
      `refused: no agent has reported box ${box} (${known} boxes report; \`layoutd fleet status\` lists them); ` +
        `check the label, or give --new-box for a box not yet started`,
    ),
  /** `fleet forget` of an unknown box (design §7.3). */
  unknownBoxToForget: (box: string) =>
    new AppError(
      'unknown_box',
      409,
      `refused: the deploy store knows no box ${box}, live or gone (\`layoutd fleet status\` lists them); ` +
        `nothing was changed`,
    ),
  /** A live box would publish itself again (design §7.3). */
  boxLive: (box: string) =>
    new AppError(
      'box_live',
      409,
      `refused: box ${box} is live (its agent holds its lease); only a gone box is forgotten: ` +
        `stop its agent first (a clean stop marks it gone at once); nothing was changed`,
    ),
  /** `--force` needs an activator to stop awake instances (design §8). */
  forceWithoutActivator: (boxes: readonly string[], fleet = false) =>
    new AppError(
      'force_without_activator',
      409,
      fleet
        ? `refused: --force for the whole fleet, but box${boxes.length === 1 ? '' : 'es'} ${boxes.join(', ')} ` +
            `${boxes.length === 1 ? 'has' : 'have'} no CARLOS_ACTIVATOR_URL to stop an awake instance with; ` +
            `set CARLOS_ACTIVATOR_URL there, or record without --force`
        : `refused: --force for box ${boxes.join(', ')}, ` +
            `which has no CARLOS_ACTIVATOR_URL to stop an awake instance with; ` +
            `set CARLOS_ACTIVATOR_URL there, or record without --force`,
    ),

  /** The opened registry is gone, corrupt or full (design §2.2); code is the fault's. */
  registryFault: (code: string, file: string, detail: string, todo: string) =>
    new AppError(code, 503, `the registry ${file} cannot be served from: ${detail}; ${todo}`),
  /** Another process holds the write lock: retry after Retry-After. */
  registryBusy: (file: string) =>
    new AppError(
      'registry_busy',
      503,
      `the registry ${file} is write-locked by another process; nothing was recorded: ask again shortly`,
    ),
  registryUnopenable: (file: string, cause: unknown) =>
    new AppError(
      'registry_unopenable',
      500,
      `cannot open the registry ${file}: ${errorMessage(cause)}; ` +
        `check that it is a SQLite file that this user can read and write, in a directory it can write`,
      { cause },
    ),
  /** A command would create a registry the running agent never reads. */
  registryGone: (file: string) =>
    new AppError(
      'registry_gone',
      409,
      `refused: ${file} is gone while the agent serving this data root runs; ` +
        `a new one here would be a database that agent never reads. ` +
        `Put the file back (from a backup) and restart the agent, or stop the agent first ` +
        `(\`layoutd serve\` creates an empty registry at start)`,
    ),

  // The layout: intent, readiness, the leg (design §5, §6).
  rolloutNeedsEtcd: (store: string) =>
    new AppError(
      'rollout_needs_etcd',
      409,
      `${store} serves one box and keeps no rollouts: a staged rollout needs the etcd deploy store ` +
        '(set CARLOS_DEPLOYMENT_ETCD); on one box, record the intent with `layoutd intent migrate|revert`',
    ),
  rolloutConflict: (what: string) => new AppError('rollout_conflict', 409, what),
  /** A box in none of the waves (design §7.6). */
  rolloutUnknownBox: (what: string) =>
    new AppError('rollout_unknown_box', 409, `${what}; \`layoutd fleet rollout status --json\` lists its waves`),
  /** The store lost what this process read: unreadable, never "none" (design §7). */
  deployStoreLost: (
    code: 'deploy_store_vanished' | 'deploy_store_emptied' | 'deploy_store_replaced',
    store: string,
    what: string,
  ) =>
    new AppError(
      code,
      503,
      `deploy store ${store}: ${code}: ${what}; the agent keeps what it has. Bring the store back and the ` +
        'next read finds it; to mean another intent, record it (`layoutd intent migrate|revert --box LABEL`) ' +
        'and restart the agent; to mean none at all, `layoutd intent forget-applied` and restart the agent',
    ),
  /** The last applied intent is missing: unreadable (design §7.7). */
  appliedIntentMissing: (store: string, what: string) =>
    new AppError(
      'applied_intent_missing',
      503,
      `deploy store ${store}: applied_intent_missing: ${what}. Nothing moves and nothing is released flat. ` +
        'Bring the store back; or record the intent you mean (`layoutd intent migrate|revert --box LABEL`); ' +
        'or, to read the store as it is now, `layoutd intent forget-applied`',
    ),
  /** Until the store opens, the intent is unreadable (design §5.3). */
  deployStoreUnopened: (why: string) =>
    new AppError(
      'deploy_store_unopened',
      503,
      `deploy_store_unopened: the deploy store cannot be opened: ${why}; it is opened again at the next read`,
    ),
  intentUnreadable: (why: string) => new AppError('intent_unreadable', 503, `the layout intent is unreadable: ${why}`),
  notReady: (phase: string) => new AppError('not_ready', 503, `layoutd is ${phase}`),
  /** `GET /ready/:host?wait=` past the bound on waits (design §6.4). */
  tooManyWaiters: (host: string, bound: string) =>
    new AppError(
      'too_many_waiters',
      503,
      `too many waits are open ${bound}; ${host} was not waited for: ask again after Retry-After, or without wait`,
    ),
  convergeTimeout: (seconds: number) =>
    new AppError(
      'converge_timeout',
      504,
      `the run did not finish within ${seconds}s; it goes on (GET /layout/status shows it)`,
    ),
  internal: () => new AppError('internal', 500, 'internal error'),
  /** `holder` names the process when /proc says (design §8). */
  addressInUse: (address: string, holder: string) =>
    new AppError(
      'address_in_use',
      409,
      `cannot listen on ${address}: it is already in use${holder === '' ? '' : ` by ${holder}`}; ` +
        `stop that process, or set CARLOS_AGENT_LISTEN to a free address`,
    ),
  /** One live agent per box label in etcd (design §7.5). */
  labelTaken: (box: string, holder: string) =>
    new AppError(
      'label_taken',
      409,
      `box label ${box} is held by another agent (${holder}); one agent per label: ` +
        `check CARLOS_BOX (a copied env file?), or stop that agent first`,
    ),
  /** A repair that cannot do what it says (design §7.4). */
  repairRefused: (message: string) => new AppError('repair_refused', 409, `refused: ${message}; nothing was written`),
  /** A LISTEN_FDS socket it cannot serve on (design §4.6). */
  inheritedSocket: (what: string) =>
    new AppError(
      'inherited_socket',
      500,
      `refusing to start: the socket systemd passed is not one layoutd can serve on: ${what}; ` +
        `check layoutd.socket (one ListenStream= of TCP or a Unix path) and that the service is started by it`,
    ),
  /** `registry restore` of a non-registry (design §8). */
  notARegistry: (file: string, why: string) =>
    new AppError('not_a_registry', 422, `refused: ${file} is not a layoutd registry: ${why}; nothing was changed`),
  /** An agent reads the registry it has open, not a restored file (design §8). */
  restoreAgentRunning: (dataDir: string, holder: string) =>
    new AppError(
      'restore_agent_running',
      409,
      `refused: an agent serves ${dataDir} (${holder}) and reads the registry it has open, not a file put in ` +
        `its place; stop it first (\`systemctl stop layoutd\`), restore, then start it; nothing was changed`,
    ),
  backupExists: (file: string) =>
    new AppError('backup_exists', 409, `refused: ${file} exists; name a new file (a backup never overwrites one)`),
  /** One agent per data root (design §4.4). */
  dataDirLocked: (dataDir: string, holder: string) =>
    new AppError(
      'data_dir_locked',
      409,
      `${dataDir} is in use by another layoutd serve (${holder}); one agent per data root: stop that one first`,
    ),

  // The command line (design §8).
  usage: (message: string, options?: ErrorOptions) => new UsageError(message, options),
  agentUnreachable: (message: string, options?: ErrorOptions) => new AgentUnreachable(message, options),
  /** The agent's error envelope: its code and status. */
  agentAnswered: (request: string, status: number, code: string | undefined, message: string) =>
    new AppError(code ?? 'unknown', status, `${request}: ${status} ${code ?? ''}: ${message}`),
  /** Another data root's agent (design §8 "Which agent"). */
  agentOtherDataRoot: (url: string, theirs: string, ours: string, via: string) =>
    new AppError(
      'agent_other_data_root',
      409,
      `the agent at ${url} (${via}) serves ${theirs}, not this data root ${ours}: nothing was asked of it; ` +
        `start this data root's agent (\`layoutd serve\` with CARLOS_DATA_DIR=${ours}), ` +
        `set CARLOS_AGENT_LISTEN to its address, or give --url to ask that other agent on purpose`,
    ),
  /** Not layoutd, or older. */
  agentUnidentified: (url: string, via: string, why: string) =>
    new AppError(
      'agent_unidentified',
      502,
      `the agent at ${url} (${via}) does not say which data root it serves (${why}): nothing was asked of it; ` +
        `is it layoutd, of this version? give --url to ask it anyway`,
    ),
  /** Only a journal of `D/layout`, by name (design §8). */
  journalOutsideLayout: (arg: string, why: string) =>
    new AppError(
      'journal_outside_layout',
      400,
      `refused: ${JSON.stringify(arg)} ${why}; \`journal release\` takes a journal of D/layout by its name ` +
        `(\`layoutd journal list\` names each) or HOST for its own journal; nothing was changed`,
    ),
  /** Not read back whole (design §8). */
  journalUnreadable: (file: string, why: string) =>
    new AppError(
      'journal_unreadable',
      409,
      `refused: ${file} ${why}; nothing was changed. Decide from where the files are ` +
        `(\`layoutd journal show ${file.replace(/^layout\//, '')}\`), then remove it by hand ` +
        `(docs/runbook.md#${/(^|\/)_batch-/.test(file) ? 'a-batch-journal' : 'a-kept-journal'})`,
    ),
  /** A batch's file is released whole or not at all (design §8). */
  journalUnsettled: (
    file: string,
    unsettled: ReadonlyArray<{ host: string; found: string; todo: string }>,
    total: number,
  ) => {
    const shown = unsettled.slice(0, IMPORT_LINES_SHOWN).map((u) => `\n  ${u.host}: ${u.found}; ${u.todo}`)
    const rest = unsettled.slice(IMPORT_LINES_SHOWN).map((u) => u.host)
    const n = unsettled.length
    return new AppError(
      'journal_unsettled',
      409,
      `refused: ${file} names ${n === total ? (n === 1 ? 'a move' : `${n} moves`) : `${n} of ${total} moves`} ` +
        `not settled, so nothing was changed:${shown.join('')}` +
        (rest.length === 0 ? '' : `\n  … and ${rest.length} more: ${rest.join(', ')}`),
    )
  },
  /** A running agent keeps journals' fences and rows in memory (design §8). */
  settleAgentRunning: (dataDir: string, holder: string) =>
    new AppError(
      'settle_agent_running',
      409,
      `refused: an agent runs on ${dataDir} (${holder}); \`journal settle\` rewrites journals and rows, which only a ` +
        `stopped agent may have done under it: stop it (\`systemctl stop layoutd\`), settle, then start it; ` +
        `nothing was changed`,
    ),
  /** Files at both the flat and the nested dir (design §5.5). */
  mintBothShapes: (host: string, flat: string, nested: string) =>
    new AppError(
      'mint_both_shapes',
      409,
      `refused to mint paths for ${host}: there is something at both its flat dir ${flat} and its nested ` +
        `dir ${nested}, and a row can name one; nothing was changed: move aside the one that is not ` +
        `the tenant's, or give the row its paths (--dir and --socket)`,
    ),
  /** The pass moves only a real directory (design §5.5). */
  mintNotDirectory: (host: string, at: string, what: string) =>
    new AppError(
      'mint_not_a_directory',
      409,
      `refused to mint paths for ${host}: ${at} is ${what}, not a directory, and the pass moves only a real ` +
        `directory; nothing was changed: put the tenant's files there as a directory, or move it aside`,
    ),
  /** It keeps the cause's code. */
  mintRefused: (host: string, cause: unknown) =>
    new AppError(
      cause instanceof AppError ? cause.code : 'mint_failed',
      503,
      `refused to mint paths for ${host}: ${errorMessage(cause)}; ` +
        `give --dir and --socket, or retry once the intent can be read`,
      { cause },
    ),

  // The data root (design §2 "Nothing outside the data root").
  dataRootNotDirectory: (path: string, what: string) =>
    new AppError(
      'data_root_not_directory',
      500,
      `${path} is ${what}, not a directory; ` +
        `layoutd uses only a real directory there (not a symlink) and changes nothing until it is one`,
    ),
  dataRootNotOurs: (path: string, owner: number, ours: number) =>
    new AppError(
      'data_root_not_ours',
      500,
      `${path} is owned by uid ${owner}, not by layoutd (uid ${ours}) or root; ` +
        `layoutd changes nothing under a directory someone else controls`,
    ),

  // The environment (design §8).
  config: (message: string) => new ConfigError(message),
} as const

/** The message of anything thrown. */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}

/** Whatever was thrown, as an Error. */
export function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err))
}

/** The CLI's exit status for a failure (design §8). */
export function exitStatusOf(err: unknown): 1 | 2 {
  return err instanceof UsageError ? 2 : 1
}

/** A catalogue error's own status, else 500. */
export function httpStatusOf(err: unknown): number {
  return err instanceof AppError ? err.statusCode : 500
}
