// Opens the deployment's deploy store (design §7). When etcd is named it is
// the store and the directory is not read: a fleet must never fall back to a
// local directory that no other box sees.
import type { Config } from '../config.js'
import type { DeployStore, Logger } from '../domain/ports.js'
import { errorMessage, errors } from '../errors.js'
import { createLogger } from '../logger.js'
import { DirDeployStore } from './deploy-dir.js'
import { EtcdCredentials } from './deploy-etcd/credentials.js'
import { EtcdDeployStore } from './deploy-etcd/store.js'

/** logger: where the etcd store reports its watch; default a logger of its own at the configured level. */
export function openDeployStore(config: Config, logger?: Logger): DeployStore {
  if (config.etcdEndpoints.length > 0) {
    return new EtcdDeployStore(config.etcdEndpoints, {
      logger: logger ?? createLogger(config.logLevel),
      credentials: etcdCredentials(config),
      watchSilenceMs: config.etcdWatchSilenceMs,
      boxTtlMs: config.etcdBoxTtlMs,
    })
  }
  return new DirDeployStore(config.deploymentDir, { boxTtlMs: config.etcdBoxTtlMs })
}

/** The TLS files and the password, read once; a file that cannot be read stops the command naming it. */
function etcdCredentials(config: Config): EtcdCredentials {
  const set = (v: string): string | undefined => (v === '' ? undefined : v)
  try {
    return EtcdCredentials.load({
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
