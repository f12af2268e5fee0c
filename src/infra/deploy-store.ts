// Opens the deployment's deploy store (design §7). When etcd is named it is
// the store and the directory is not read: a fleet must never fall back to a
// local directory that no other box sees.
import type { Config } from '../config.js'
import type { DeployStore, Logger } from '../domain/ports.js'
import { createLogger } from '../logger.js'
import { DirDeployStore } from './deploy-dir.js'
import { EtcdDeployStore } from './deploy-etcd/store.js'

/** logger: where the etcd store reports its watch; default a logger of its own at the configured level. */
export function openDeployStore(config: Config, logger?: Logger): DeployStore {
  if (config.etcdEndpoints.length > 0) {
    return new EtcdDeployStore(config.etcdEndpoints, { logger: logger ?? createLogger(config.logLevel) })
  }
  return new DirDeployStore(config.deploymentDir)
}
