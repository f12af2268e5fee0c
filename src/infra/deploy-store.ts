// Opens the deployment's deploy store (DESIGN §7). When etcd is named it is
// the store and the directory is not read: a fleet must never fall back to a
// local directory that no other box sees, so an etcd deployment on a build
// without the etcd store fails loudly instead of reading the wrong place.
import type { Config } from '../config.js'
import type { DeployStore } from '../domain/ports.js'
import { DirDeployStore } from './deploy-dir.js'

export function openDeployStore(config: Config): DeployStore {
  if (config.etcdEndpoints.length > 0) {
    throw new Error('CARLOS_DEPLOYMENT_ETCD is set, but this build has no etcd deploy store yet')
  }
  return new DirDeployStore(config.deploymentDir)
}
