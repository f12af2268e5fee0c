// Certificates for a TLS etcd in the tests, made by `openssl` in a temp dir:
// a CA; a server certificate for 127.0.0.1 (as an IP SAN, and for client
// use too: the gateway dials its own member with it); client certificates
// with no Common Name (etcd refuses a CN through its JSON gateway once auth
// is on: the user is the token's), and one with a CN to see that refusal;
// one client certificate that expired in 2020; and a second CA that signed
// none of them (a wrong CARLOS_ETCD_CA). `openssl ca`
// is used for the expired one, since `openssl x509` cannot date a
// certificate in the past.
import { execFileSync } from 'node:child_process'
import fs from 'node:fs/promises'
import path from 'node:path'

export interface Pair {
  cert: string
  key: string
}

export interface EtcdCerts {
  dir: string
  ca: string
  /** A CA that signed nothing here. */
  otherCa: string
  server: Pair
  /** A client certificate with no Common Name (subject O=name). */
  client(name: string): Promise<Pair>
  /** A client certificate whose Common Name is cn. */
  clientWithCn(cn: string): Promise<Pair>
  /** A client certificate (no CN) valid only in January 2020. */
  expired: Pair
}

function openssl(dir: string, ...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] })
}

function keyAndCsr(dir: string, name: string, subject: string): void {
  openssl(
    dir,
    'req',
    '-new',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.csr`,
    '-subj',
    subject,
  )
}

async function sign(dir: string, name: string, ext: string): Promise<Pair> {
  await fs.writeFile(path.join(dir, `${name}.ext`), ext)
  openssl(
    dir,
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-days',
    '2',
    '-sha256',
    '-extfile',
    `${name}.ext`,
    '-out',
    `${name}.pem`,
  )
  return { cert: path.join(dir, `${name}.pem`), key: path.join(dir, `${name}.key`) }
}

const CLIENT_EXT = 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n'

export async function makeEtcdCerts(dir: string): Promise<EtcdCerts> {
  await fs.mkdir(dir, { recursive: true })
  openssl(
    dir,
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
    '-days',
    '2',
    '-subj',
    '/CN=layoutd test CA',
  )
  openssl(
    dir,
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'other-ca.key',
    '-out',
    'other-ca.pem',
    '-days',
    '2',
    '-subj',
    '/CN=another CA',
  )
  keyAndCsr(dir, 'server', '/CN=127.0.0.1')
  const server = await sign(
    dir,
    'server',
    'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=IP:127.0.0.1\n',
  )
  // The expired one: `openssl ca` takes explicit dates.
  await fs.writeFile(path.join(dir, 'index.txt'), '')
  await fs.writeFile(path.join(dir, 'serial'), '1000\n')
  await fs.writeFile(
    path.join(dir, 'ca.cnf'),
    [
      '[ca]',
      'default_ca = test',
      '[test]',
      'database = index.txt',
      'serial = serial',
      'new_certs_dir = .',
      'certificate = ca.pem',
      'private_key = ca.key',
      'default_md = sha256',
      'policy = any',
      'unique_subject = no',
      'x509_extensions = client',
      '[any]',
      'organizationName = supplied',
      '[client]',
      ...CLIENT_EXT.trim().split('\n'),
      '',
    ].join('\n'),
  )
  keyAndCsr(dir, 'expired', '/O=layoutd')
  openssl(
    dir,
    'ca',
    '-batch',
    '-config',
    'ca.cnf',
    '-in',
    'expired.csr',
    '-out',
    'expired.pem',
    '-startdate',
    '20200101000000Z',
    '-enddate',
    '20200102000000Z',
    '-notext',
  )
  const made = new Map<string, Pair>()
  const client = async (file: string, subject: string): Promise<Pair> => {
    const have = made.get(file)
    if (have !== undefined) return have
    keyAndCsr(dir, file, subject)
    const pair = await sign(dir, file, CLIENT_EXT)
    made.set(file, pair)
    return pair
  }
  return {
    dir,
    ca: path.join(dir, 'ca.pem'),
    otherCa: path.join(dir, 'other-ca.pem'),
    server,
    expired: { cert: path.join(dir, 'expired.pem'), key: path.join(dir, 'expired.key') },
    client: (name) => client(`client-${name}`, `/O=${name}`),
    clientWithCn: (cn) => client(`cn-${cn}`, `/CN=${cn}`),
  }
}
