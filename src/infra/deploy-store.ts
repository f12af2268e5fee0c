// Opens the deployment's deploy store (design §7): etcd when named, else
// the directory. When etcd is named it is
// the store and the directory is not read: a fleet must never fall back to a
// local directory that no other box sees. Only the store named is loaded:
// a box on a directory never loads the etcd client (nor undici, its HTTP
// client), which would cost every start about 150 ms of CPU.
import type { Config } from '../config.js'
import type { DeployStore, Logger } from '../domain/ports.js'
import { errorMessage, errors } from '../errors.js'
import { createLogger } from '../logger.js'
import type { EtcdCredentials } from './deploy-etcd/credentials.js'

/** logger: where the etcd store reports its watch; default a logger of its own at the configured level. */
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

/** The TLS files and the password, read once; a file that cannot be read stops the command naming it. */
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
