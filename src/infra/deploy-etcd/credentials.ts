// How layoutd proves itself to etcd (design §7.1): the TLS files, read
// once, and etcd's user, traded for a token that is traded again when etcd
// refuses it; each TLS or auth failure in the operator's words.
import { X509Certificate } from 'node:crypto'
import fs from 'node:fs'
import { errorMessage } from '../../errors.js'

/** Every field optional: no TLS, no auth. */
export interface EtcdCredentialFiles {
  ca?: string
  cert?: string
  key?: string
  user?: string
  passwordFile?: string
}

export interface TlsOptions {
  ca?: Buffer
  cert?: Buffer
  key?: Buffer
}

/** A password file holds one line; more than this is not one. */
const MAX_PASSWORD_BYTES = 4096

function readFileNamed(what: string, file: string): Buffer {
  try {
    return fs.readFileSync(file)
  } catch (err) {
    throw new Error(`${what} ${file} cannot be read: ${errorMessage(err)}`, { cause: err })
  }
}

/** etcd's words for a token no longer good (expired, or a restarted member forgot it). */
const STALE_TOKEN = /invalid auth token|auth token is expired|token is expired|ErrInvalidAuthToken/i

export function isStaleTokenAnswer(message: string): boolean {
  return STALE_TOKEN.test(message)
}

/** Codes of a certificate no CA in CARLOS_ETCD_CA signed. */
const UNTRUSTED_CERT_CODES = [
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT(_LOCALLY)?',
]
const UNTRUSTED_CERT = new RegExp(`^(${UNTRUSTED_CERT_CODES.join('|')})$`)

/** A TLS or auth failure in the operator's words, naming the variable; undefined when neither. */
export function explainFailure(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | undefined)?.code
  const msg = errorMessage(err)
  const c = typeof code === 'string' ? code : ''
  if (UNTRUSTED_CERT.test(c)) {
    return `its certificate is not signed by a CA in CARLOS_ETCD_CA (${c})`
  }
  if (c === 'CERT_HAS_EXPIRED') return 'its certificate has expired (CERT_HAS_EXPIRED)'
  if (c === 'ERR_TLS_CERT_ALTNAME_INVALID') return `its certificate does not name the endpoint's host (${msg})`
  if (/certificate expired|alert number 45/i.test(msg))
    return `it refused our client certificate as expired (CARLOS_ETCD_CERT): ${msg}`
  if (/bad certificate|alert number 42|certificate required|alert number 116|unknown ca|alert number 48/i.test(msg)) {
    return `it refused our client certificate (CARLOS_ETCD_CERT, CARLOS_ETCD_KEY): ${msg}`
  }
  if (/CommonName of client sending a request against gateway/i.test(msg)) {
    return (
      `it refuses a client certificate with a Common Name through its JSON gateway once auth is on; ` +
      `give CARLOS_ETCD_CERT a certificate without a CN (the user is CARLOS_ETCD_USER): ${msg}`
    )
  }
  if (/authentication failed|invalid user ID or password/i.test(msg))
    return `it refused CARLOS_ETCD_USER's password (CARLOS_ETCD_PASSWORD_FILE): ${msg}`
  if (/permission denied/i.test(msg)) return `the user's role may not do this under the key prefix: ${msg}`
  if (/user name is empty|authentication is not enabled/i.test(msg)) return msg
  return undefined
}

export class EtcdCredentials {
  readonly tls: TlsOptions
  readonly user: string | undefined
  readonly #password: string | undefined
  #token: string | undefined
  #authenticating: Promise<string> | undefined

  private constructor(tls: TlsOptions, user: string | undefined, password: string | undefined) {
    this.tls = tls
    this.user = user
    this.#password = password
  }

  static none(): EtcdCredentials {
    return new EtcdCredentials({}, undefined, undefined)
  }

  /** Reads the files once; throws naming the file or variable that cannot be read or lacks its pair. */
  static load(files: EtcdCredentialFiles): EtcdCredentials {
    if ((files.cert === undefined) !== (files.key === undefined)) {
      throw new Error(
        'CARLOS_ETCD_CERT and CARLOS_ETCD_KEY go together: ' +
          'a client certificate needs its key, and a key its certificate',
      )
    }
    if ((files.user === undefined) !== (files.passwordFile === undefined)) {
      throw new Error(
        'CARLOS_ETCD_USER and CARLOS_ETCD_PASSWORD_FILE go together: a user needs a password, and a password its user',
      )
    }
    const tls: TlsOptions = {}
    if (files.ca !== undefined) tls.ca = readFileNamed('CARLOS_ETCD_CA', files.ca)
    if (files.cert !== undefined) tls.cert = readFileNamed('CARLOS_ETCD_CERT', files.cert)
    if (files.key !== undefined) tls.key = readFileNamed('CARLOS_ETCD_KEY', files.key)
    let password: string | undefined
    if (files.passwordFile !== undefined) {
      const raw = readFileNamed('CARLOS_ETCD_PASSWORD_FILE', files.passwordFile)
      if (raw.length > MAX_PASSWORD_BYTES)
        throw new Error(
          `CARLOS_ETCD_PASSWORD_FILE ${files.passwordFile} is ${raw.length} bytes; a password file holds one line`,
        )
      // One trailing newline is the file's, not the password's (echo pw > file).
      password = raw.toString('utf8').replace(/\r?\n$/, '')
      if (password === '') throw new Error(`CARLOS_ETCD_PASSWORD_FILE ${files.passwordFile} is empty`)
    }
    return new EtcdCredentials(tls, files.user, password)
  }

  /**
   * etcd refuses a client certificate after the handshake, which we see as a closed connection; our own
   * certificate says which failure it likely is.
   */
  explain(err: unknown, https: boolean): string | undefined {
    const known = explainFailure(err)
    if (known !== undefined || !https) return known
    const code = (err as { code?: unknown } | undefined)?.code
    if (
      code !== 'UND_ERR_SOCKET' &&
      code !== 'ECONNRESET' &&
      !/other side closed|socket hang up/i.test(errorMessage(err))
    )
      return undefined
    const cert = this.tls.cert
    if (cert === undefined) {
      return (
        `it closed the connection after the TLS handshake, as etcd does when it asks for a client certificate ` +
        `and none is shown: set CARLOS_ETCD_CERT and CARLOS_ETCD_KEY (${errorMessage(err)})`
      )
    }
    let validTo: string | undefined
    try {
      const x = new X509Certificate(cert)
      if (Date.parse(x.validTo) < Date.now()) validTo = x.validTo
    } catch {
      // Not a PEM we can read: the TLS layer would have refused it; say what we can.
    }
    if (validTo !== undefined)
      return `it refused our client certificate: CARLOS_ETCD_CERT expired on ${validTo} (${errorMessage(err)})`
    return (
      `it closed the connection after the TLS handshake, as etcd does when it refuses our client certificate ` +
      `(CARLOS_ETCD_CERT: not signed by its CA?) (${errorMessage(err)})`
    )
  }

  get usesTls(): boolean {
    return this.tls.cert !== undefined || this.tls.ca !== undefined
  }

  /** Plain http with a certificate set would guard nothing and send the password in the clear. */
  checkEndpoint(url: URL): void {
    if (url.protocol === 'https:') return
    if (this.tls.cert !== undefined || this.tls.ca !== undefined) {
      throw new Error(
        `etcd endpoint ${url.href} is plain http while CARLOS_ETCD_CERT or CARLOS_ETCD_CA is set; write it https://`,
      )
    }
  }

  get authenticates(): boolean {
    return this.user !== undefined
  }

  /** The token, authenticating first through fetch (the gateway's call, with its failover) when none. */
  async token(fetch: (body: { name: string; password: string }) => Promise<string>): Promise<string | undefined> {
    const user = this.user
    const password = this.#password
    if (user === undefined || password === undefined) return undefined
    if (this.#token !== undefined) return this.#token
    this.#authenticating ??= fetch({ name: user, password })
      .then((t) => (this.#token = t))
      .finally(() => (this.#authenticating = undefined))
    return this.#authenticating
  }

  get current(): string | undefined {
    return this.#token
  }

  /** Forgets the refused token only: a newer one another call got is kept. */
  forget(token: string | undefined): void {
    if (token !== undefined && this.#token === token) this.#token = undefined
  }
}
