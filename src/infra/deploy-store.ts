// Opens the deployment's deploy store (design §7): etcd when named, else the directory; for the agent, a store that
// cannot be opened yet reads unreadable while it is opened again (design §5.3). A fleet never falls back to a local
// directory.
import type { Config } from '../config.js'
import type { BoxSummary, KeptBox } from '../domain/box-summary.js'
import type { DeployStore, LabelHolder, Logger } from '../domain/ports.js'
import type { IntentRecord } from '../domain/schemas.js'
import { errorMessage, errors } from '../errors.js'
import { createLogger } from '../logger.js'
import type { EtcdCredentials } from './deploy-etcd/credentials.js'

/** logger: the etcd watch's. */
export async function openDeployStore(config: Config, logger?: Logger): Promise<DeployStore> {
  if (config.etcdEndpoints.length > 0) {
    const [{ EtcdDeployStore }, { EtcdCredentials }] = await Promise.all([
      import('./deploy-etcd/store.js'),
      import('./deploy-etcd/credentials.js'),
    ])
    return new EtcdDeployStore(config.etcdEndpoints, {
      logger: logger ?? createLogger(config.logLevel),
      credentials: etcdCredentials(EtcdCredentials, config),
      watchSilenceMs: config.etcdWatchSilenceMs,
      boxTtlMs: config.etcdBoxTtlMs,
    })
  }
  const { DirDeployStore } = await import('./deploy-dir.js')
  return new DirDeployStore(config.deploymentDir, { boxTtlMs: config.etcdBoxTtlMs })
}

/** An unreadable file stops the command naming it. */
function etcdCredentials(credentials: typeof EtcdCredentials, config: Config): EtcdCredentials {
  const set = (v: string): string | undefined => (v === '' ? undefined : v)
  try {
    return credentials.load({
      ca: set(config.etcdCa),
      cert: set(config.etcdCert),
      key: set(config.etcdKey),
      user: set(config.etcdUser),
      passwordFile: set(config.etcdPasswordFile),
    })
  } catch (err) {
    throw errors.config(errorMessage(err))
  }
}

/** One that cannot open must not stop the agent (design §5.3, §7.1): it reads unreadable. */
export async function openAgentDeployStore(
  config: Config,
  logger: Logger,
  open: (config: Config, logger: Logger) => Promise<DeployStore> = openDeployStore,
): Promise<DeployStore> {
  try {
    return await open(config, logger)
  } catch (err) {
    logger.error(
      { err },
      `layout: the deploy store cannot be opened: ${errorMessage(err)}; ` +
        'the intent reads unreadable and it is opened again at each read',
    )
    return new ReopeningStore(config, logger, open, err)
  }
}

class ReopeningStore implements DeployStore {
  readonly tracksBoxes: boolean
  #store: DeployStore | undefined
  #why: unknown
  #opening: Promise<DeployStore> | undefined
  readonly #watches: Array<{ onChange: () => void; signal: AbortSignal }> = []
  /** The label to take once open (design §7.5). */
  #label: LabelHolder | undefined
  #closed = false

  constructor(
    private readonly config: Config,
    private readonly logger: Logger,
    private readonly open: (config: Config, logger: Logger) => Promise<DeployStore>,
    why: unknown,
  ) {
    this.tracksBoxes = config.etcdEndpoints.length > 0
    this.#why = why
  }

  async #opened(): Promise<DeployStore> {
    if (this.#store !== undefined) return this.#store
    if (this.#closed) throw errors.deployStoreUnopened(errorMessage(this.#why))
    this.#opening ??= this.open(this.config, this.logger).finally(() => (this.#opening = undefined))
    try {
      const store = await this.#opening
      if (this.#store === undefined) this.#adopt(store)
      return this.#store ?? store
    } catch (err) {
      this.#why = err
      throw errors.deployStoreUnopened(errorMessage(err))
    }
  }

  #adopt(store: DeployStore): void {
    this.#store = store
    this.logger.info({ store: store.describe() }, 'layout: the deploy store is open')
    const label = this.#label
    // Another agent holding the label by now is said by the store, which then publishes nothing.
    if (label !== undefined)
      store.claimLabel?.(label, AbortSignal.timeout(30_000)).catch((err: unknown) => {
        this.logger.error({ err }, `layout: the box label: ${errorMessage(err)}`)
      })
    for (const w of this.#watches.splice(0)) {
      if (w.signal.aborted) continue
      store.watch?.(w.onChange, w.signal)
      w.onChange()
    }
  }

  async list(signal: AbortSignal): Promise<IntentRecord[]> {
    return (await this.#opened()).list(signal)
  }

  async record(intent: IntentRecord, signal: AbortSignal): Promise<void> {
    return (await this.#opened()).record(intent, signal)
  }

  watch(onChange: () => void, signal: AbortSignal): void {
    if (this.#store !== undefined) this.#store.watch?.(onChange, signal)
    else this.#watches.push({ onChange, signal })
  }

  describe(): string {
    return this.#store?.describe() ?? `deploy store (not open: ${errorMessage(this.#why)})`
  }

  identity(): string {
    return this.#store?.identity?.() ?? 'deploy store (not open)'
  }

  async close(): Promise<void> {
    this.#closed = true
    await this.#opening?.then((s) => (this.#store ??= s)).catch(() => undefined)
    await this.#store?.close()
  }

  async publishBox(summary: BoxSummary, signal: AbortSignal): Promise<void> {
    return (await this.#opened()).publishBox?.(summary, signal)
  }

  /** Takes the label now, or once the store opens. */
  async claimLabel(holder: LabelHolder, signal: AbortSignal): Promise<void> {
    if (this.#store !== undefined) return this.#store.claimLabel?.(holder, signal)
    this.#label = holder
    await this.#opened()
  }

  async listBoxes(signal: AbortSignal): Promise<BoxSummary[]> {
    return (await (await this.#opened()).listBoxes?.(signal)) ?? []
  }

  async listKnownBoxes(signal: AbortSignal): Promise<KeptBox[]> {
    const store = await this.#opened()
    if (store.listKnownBoxes === undefined)
      return (await store.listBoxes?.(signal))?.map((summary) => ({ summary })) ?? []
    return store.listKnownBoxes(signal)
  }

  async remove(ids: readonly string[], signal: AbortSignal): Promise<void> {
    return (await this.#opened()).remove?.(ids, signal)
  }
}
