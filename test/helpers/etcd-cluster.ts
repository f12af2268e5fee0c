// A 3-member etcd cluster on loopback for one test (test/helpers/etcd.ts
// starts the members: random ports, a data dir each, killed when the test
// ends), and which member leads, as each member's maintenance status says:
// the leader is the member whose own id is the leader id it reports.
import type { TestContext } from 'node:test'
import { request } from 'undici'
import { EtcdServer } from './etcd.js'
import { until } from './until.js'

interface MaintenanceStatus {
  header?: { member_id?: string }
  leader?: string
}

async function status(m: EtcdServer): Promise<MaintenanceStatus | undefined> {
  try {
    const res = await request(`${m.url}/v3/maintenance/status`, {
      method: 'POST',
      body: '{}',
      signal: AbortSignal.timeout(5_000),
    })
    if (res.statusCode !== 200) {
      await res.body.dump()
      return undefined
    }
    return (await res.body.json()) as MaintenanceStatus
  } catch {
    return undefined
  }
}

export class EtcdCluster {
  private constructor(readonly members: EtcdServer[]) {}

  /** Three members for one test. */
  static async forTest(t: TestContext, n = 3): Promise<EtcdCluster> {
    return new EtcdCluster(await EtcdServer.clusterForTest(t, n))
  }

  get endpoints(): string[] {
    return this.members.map((m) => m.url)
  }

  /** The member that leads now (waits for one to be elected), asked of the members that answer. */
  async leader(except: readonly EtcdServer[] = []): Promise<EtcdServer> {
    return until(
      'a leader',
      async () => {
        for (const m of this.members) {
          if (except.includes(m)) continue
          const s = await status(m)
          if (s?.leader !== undefined && s.leader !== '0' && s.leader === s.header?.member_id) return m
        }
        return undefined
      },
      20_000,
    )
  }
}
