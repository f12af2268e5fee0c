// The etcd deploy store against a real etcd that serves https only, asks
// for a client certificate (--client-cert-auth) and has its auth on, with
// certificates `openssl` makes here (test/helpers/etcd-tls.ts). What works
// works through the same gateway calls as plain http; each failure (a wrong
// CA, an expired, a missing or a CN-bearing client certificate, a wrong
// password, a role that may not read /carlos/layout/) leaves the intent
// unreadable with the reason named, never a crash nor another store; a
// token etcd forgot is traded again.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { after, before, test, type TestContext } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import { request, Agent } from 'undici'
import { intentCommand, readIntentStatus } from '../../src/cli/commands/intent.js'
import { loadConfig } from '../../src/config.js'
import { EtcdCredentials, type EtcdCredentialFiles } from '../../src/infra/deploy-etcd/credentials.js'
import { EtcdDeployStore, INTENT_PREFIX } from '../../src/infra/deploy-etcd/store.js'
import { openDeployStore } from '../../src/infra/deploy-store.js'
import { EtcdServer } from '../helpers/etcd.js'
import { makeEtcdCerts, type EtcdCerts } from '../helpers/etcd-tls.js'
import { sink } from '../helpers/sink.js'
import { changes, live, rec } from '../infra/deploy-etcd/fixtures.js'

let etcd: EtcdServer | undefined
let certs: EtcdCerts | undefined
let dir = ''

before(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'layoutd-etcd-tls-'))
  certs = await makeEtcdCerts(path.join(dir, 'certs'))
  // A token lives a second unused: the renewal case waits it out.
  etcd = await EtcdServer.start(path.join(dir, 'etcd'), {
    certs,
    clientCertAuth: true,
    admin: await certs.client('admin'),
    args: ['--auth-token-ttl', '1'],
  })
  await etcd.enableAuth([
    { name: 'layoutd', password: 'layoutd-password', readwrite: ['/carlos/layout/'] },
    { name: 'reader', password: 'reader-password', read: ['/carlos/layout/'] },
    { name: 'outsider', password: 'outsider-password', read: ['/other/'] },
  ])
})

after(async () => {
  await etcd?.kill()
  if (dir !== '') await fs.rm(dir, { recursive: true, force: true })
})

function server(): { etcd: EtcdServer; certs: EtcdCerts } {
  if (etcd === undefined || certs === undefined) throw new Error('the TLS etcd did not start')
  return { etcd, certs }
}

async function passwordFile(name: string, password: string): Promise<string> {
  const file = path.join(dir, `${name}.password`)
  await fs.writeFile(file, `${password}\n`, { mode: 0o600 })
  return file
}

/** A store on the TLS etcd with these credentials, closed when the test ends. */
function storeWith(t: TestContext, files: EtcdCredentialFiles): EtcdDeployStore {
  const store = new EtcdDeployStore([server().etcd.url], {
    credentials: EtcdCredentials.load(files),
    // A refusal is an answer: the bounds are only for an etcd that says nothing, which none here is.
    requestTimeoutMs: 10_000,
    dialTimeoutMs: 10_000,
  })
  t.after(() => store.close())
  return store
}

/** What `intent status` (the agent's own read) says with these credentials: unreadable, and why. */
async function unreadable(t: TestContext, files: EtcdCredentialFiles): Promise<string> {
  const s = await readIntentStatus(storeWith(t, files), 'kass-1')
  assert.equal(s.mode, 'unreadable')
  assert.equal(s.intent, null)
  return s.error ?? ''
}

void test('1. a client certificate and our CA: records, lists, watches and keeps a box summary over https', async (t) => {
  const { certs } = server()
  const { cert, key } = await certs.client('layoutd')
  const store = storeWith(t, {
    ca: certs.ca,
    cert,
    key,
    user: 'layoutd',
    passwordFile: await passwordFile('layoutd-1', 'layoutd-password'),
  })
  const c = changes()
  const ac = new AbortController()
  t.after(() => ac.abort())
  const established = c.next('established')
  store.watch(c.onChange, ac.signal)
  await established
  const landed = c.next('a record')
  await store.record(rec('20261201T080000.000Z-aaaaaa'), live())
  await landed
  assert.deepEqual(
    (await store.list(live())).map((r) => r.id),
    ['20261201T080000.000Z-aaaaaa'],
  )
  const s = await readIntentStatus(store, 'kass-1')
  assert.equal(s.mode, 'nested')
  await store.publishBox(
    {
      box: 'kass-1',
      version: '0.1.0',
      intent: s.intent?.id ?? null,
      mode: 'nested',
      converged: true,
      counts: { nested: 1 },
      held: 0,
      leg: { running: false, pending: false, lastRunAt: null },
      at: new Date().toISOString(),
    },
    live(),
  )
  assert.deepEqual(
    (await store.listBoxes(live())).map((b) => b.box),
    ['kass-1'],
  )
  await server().etcd.del(`${INTENT_PREFIX}20261201T080000.000Z-aaaaaa`)
})

void test('2. a CA that did not sign the server: unreadable, naming CARLOS_ETCD_CA', async (t) => {
  const { certs } = server()
  const { cert, key } = await certs.client('layoutd')
  const why = await unreadable(t, {
    ca: certs.otherCa,
    cert,
    key,
    user: 'layoutd',
    passwordFile: await passwordFile('layoutd-2', 'layoutd-password'),
  })
  assert.match(
    why,
    /its certificate is not signed by a CA in CARLOS_ETCD_CA \((SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT_LOCALLY)\)/,
  )
})

void test('3. an expired client certificate: unreadable, naming the certificate', async (t) => {
  const { certs } = server()
  const why = await unreadable(t, {
    ca: certs.ca,
    cert: certs.expired.cert,
    key: certs.expired.key,
    user: 'layoutd',
    passwordFile: await passwordFile('layoutd-3', 'layoutd-password'),
  })
  assert.match(why, /it refused our client certificate: CARLOS_ETCD_CERT expired on Jan {1,2}2 00:00:00 2020 GMT/)
})

void test('4. no client certificate where etcd asks for one: unreadable, naming the certificate', async (t) => {
  const { certs } = server()
  const why = await unreadable(t, {
    ca: certs.ca,
    user: 'layoutd',
    passwordFile: await passwordFile('layoutd-4', 'layoutd-password'),
  })
  assert.match(why, /it asks for a client certificate and none is shown: set CARLOS_ETCD_CERT and CARLOS_ETCD_KEY/)
})

void test('4b. a client certificate with a Common Name: unreadable, saying the gateway refuses a CN', async (t) => {
  const { certs } = server()
  const { cert, key } = await certs.clientWithCn('layoutd')
  const why = await unreadable(t, {
    ca: certs.ca,
    cert,
    key,
    user: 'layoutd',
    passwordFile: await passwordFile('layoutd-4b', 'layoutd-password'),
  })
  assert.match(why, /refuses a client certificate with a Common Name through its JSON gateway.*without a CN/)
})

void test('5. user and password: the token reads; a read-only role may not record, and says so', async (t) => {
  const { certs } = server()
  const { cert, key } = await certs.client('reader')
  const store = storeWith(t, {
    ca: certs.ca,
    cert,
    key,
    user: 'reader',
    passwordFile: await passwordFile('reader', 'reader-password'),
  })
  const s = await readIntentStatus(store, 'kass-1')
  assert.equal(s.mode, 'none', s.error)
  const config = loadConfig({ CARLOS_BOX: 'kass-1', CARLOS_DATA_DIR: dir })
  const out = sink()
  const err = sink()
  const code = await intentCommand(['migrate', '--fleet'], { config, store, stdout: out.stream, stderr: err.stream })
  assert.equal(code, 1)
  assert.match(err.text(), /the user's role may not do this under the key prefix: .*permission denied/)
  assert.equal((await server().etcd.range(INTENT_PREFIX)).size, 0)
})

void test('6. a wrong password: unreadable, naming CARLOS_ETCD_PASSWORD_FILE', async (t) => {
  const { certs } = server()
  const { cert, key } = await certs.client('layoutd')
  const why = await unreadable(t, {
    ca: certs.ca,
    cert,
    key,
    user: 'layoutd',
    passwordFile: await passwordFile('wrong', 'not-the-password'),
  })
  assert.match(
    why,
    /it refused CARLOS_ETCD_USER's password \(CARLOS_ETCD_PASSWORD_FILE\): .*authentication failed, invalid user ID or password/,
  )
})

void test('7. a role without read on /carlos/layout/: unreadable, permission denied', async (t) => {
  const { certs } = server()
  const { cert, key } = await certs.client('outsider')
  const why = await unreadable(t, {
    ca: certs.ca,
    cert,
    key,
    user: 'outsider',
    passwordFile: await passwordFile('outsider', 'outsider-password'),
  })
  assert.match(why, /the user's role may not do this under the key prefix: .*permission denied/)
})

void test('8. a token etcd no longer knows is traded again, once, and the read goes through', async (t) => {
  const { certs, etcd } = server()
  const { cert, key } = await certs.client('layoutd')
  const credentials = EtcdCredentials.load({
    ca: certs.ca,
    cert,
    key,
    user: 'layoutd',
    passwordFile: await passwordFile('layoutd', 'layoutd-password'),
  })
  const store = new EtcdDeployStore([etcd.url], { credentials })
  t.after(() => store.close())
  await store.list(live())
  const first = credentials.current
  assert.ok(first !== undefined)
  // The server's simple tokens live a second unused.
  await delay(2500)
  const dispatcher = new Agent({
    connect: { ca: await fs.readFile(certs.ca), cert: await fs.readFile(cert), key: await fs.readFile(key) },
  })
  t.after(() => dispatcher.close())
  const stale = await request(`${etcd.url}/v3/kv/range`, {
    dispatcher,
    method: 'POST',
    headers: { authorization: first },
    body: JSON.stringify({ key: Buffer.from(INTENT_PREFIX).toString('base64') }),
  })
  assert.match(await stale.body.text(), /invalid auth token/, 'the first token is gone')
  assert.deepEqual(await store.list(live()), [])
  assert.ok(credentials.current !== undefined && credentials.current !== first, 'a new token')
})

void test('the environment: a certificate with a plain http endpoint, or without its key, or a user without a password file, is refused at start', async (t) => {
  const { certs } = server()
  const { cert, key } = await certs.client('layoutd')
  assert.throws(
    () => loadConfig({ CARLOS_DEPLOYMENT_ETCD: 'http://127.0.0.1:2379', CARLOS_ETCD_CERT: cert, CARLOS_ETCD_KEY: key }),
    /CARLOS_DEPLOYMENT_ETCD=http:\/\/127\.0\.0\.1:2379: .* is plain http while CARLOS_ETCD_CERT or CARLOS_ETCD_CA is set; write https:\/\//,
  )
  assert.throws(
    () => loadConfig({ CARLOS_DEPLOYMENT_ETCD: server().etcd.url, CARLOS_ETCD_CERT: cert }),
    /CARLOS_ETCD_CERT=.*set CARLOS_ETCD_KEY too/,
  )
  assert.throws(
    () => loadConfig({ CARLOS_DEPLOYMENT_ETCD: server().etcd.url, CARLOS_ETCD_USER: 'layoutd' }),
    /CARLOS_ETCD_USER=layoutd: an etcd user and its password file go together; set CARLOS_ETCD_PASSWORD_FILE too/,
  )
  const missing = loadConfig({
    CARLOS_DEPLOYMENT_ETCD: server().etcd.url,
    CARLOS_ETCD_CA: path.join(dir, 'no-such-ca.pem'),
  })
  await assert.rejects(openDeployStore(missing), /CARLOS_ETCD_CA .*no-such-ca\.pem cannot be read: ENOENT/)
  // The whole environment, as the agent reads it, reaches etcd.
  const config = loadConfig({
    CARLOS_BOX: 'kass-1',
    CARLOS_DATA_DIR: dir,
    CARLOS_DEPLOYMENT_ETCD: server().etcd.url,
    CARLOS_ETCD_CA: certs.ca,
    CARLOS_ETCD_CERT: cert,
    CARLOS_ETCD_KEY: key,
    CARLOS_ETCD_USER: 'layoutd',
    CARLOS_ETCD_PASSWORD_FILE: await passwordFile('layoutd-env', 'layoutd-password'),
  })
  const store = await openDeployStore(config)
  t.after(() => store.close())
  assert.equal((await readIntentStatus(store, 'kass-1')).mode, 'none')
})
