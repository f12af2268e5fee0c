// How layoutd proves itself to etcd (design §7.1): the TLS files, read
// once, and etcd's user, traded for a token that is traded again when etcd
// refuses it; each TLS or auth failure in the operator's words. The gateway
// asks it for a connection's options and a call's headers.
import { X509Certificate } from 'node:crypto'
import fs from 'node:fs'
import { errorMessage } from '../../errors.js'

/** What the environment names; every field optional (no TLS, no auth). */
export interface EtcdCredentialFiles {
  ca?: string
  cert?: string
  key?: string
  user?: string
  passwordFile?: string
}

/** The TLS options of a connection, as undici's connect takes them. */
export interface TlsOptions {
  ca?: Buffer
  cert?: Buffer
  key?: Buffer
}

/** A password file holds one line: the password; more than this is not one. */
const MAX_PASSWORD_BYTES = 4096

function readFileNamed(what: string, file: string): Buffer {
  try {
    return fs.readFileSync(file)
  } catch (err) {
    throw new Error(`${what} ${file} cannot be read: ${errorMessage(err)}`, { cause: err })
  }
}

/** etcd's answers that say a token is no longer good (expired, or a restarted member forgot it). */
const STALE_TOKEN = /invalid auth token|auth token is expired|token is expired|ErrInvalidAuthToken/i

export function isStaleTokenAnswer(message: string): boolean {
  return STALE_TOKEN.test(message)
}

/** The TLS codes of a certificate no CA in CARLOS_ETCD_CA signed: the alternatives of one anchored pattern. */
const UNTRUSTED_CERT_CODES = [
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT(_LOCALLY)?',
]
const UNTRUSTED_CERT = new RegExp(`^(${UNTRUSTED_CERT_CODES.join('|')})$`)

/**
 * What a TLS or auth failure means, in the operator's words, with the
 * variable to look at; undefined when the failure is neither.
 */
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
  /** The token etcd gave for user, while it is good. */
  #token: string | undefined
  /** The authenticate under way, so concurrent calls share one. */
  #authenticating: Promise<string> | undefined

  private constructor(tls: TlsOptions, user: string | undefined, password: string | undefined) {
    this.tls = tls
    this.user = user
    this.#password = password
  }

  /** No TLS files and no user: plain http, no token. */
  static none(): EtcdCredentials {
    return new EtcdCredentials({}, undefined, undefined)
  }

  /**
   * Reads the files once. Throws naming the file or the variable when one
   * cannot be read, when a certificate comes without its key (or the other
   * way round), or a user without a password file.
   */
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
   * What a failure on an https endpoint means. etcd answers a client
   * certificate it refuses (expired, from another CA, or none where it
   * asks for one) with a TLS alert once the handshake is over, which the
   * client sees only as the connection closing; our own certificate says
   * which of the three it likely is.
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
      // Not a PEM we can read: the TLS layer would have refused it earlier; say what we can below.
    }
    if (validTo !== undefined)
      return `it refused our client certificate: CARLOS_ETCD_CERT expired on ${validTo} (${errorMessage(err)})`
    return (
      `it closed the connection after the TLS handshake, as etcd does when it refuses our client certificate ` +
      `(CARLOS_ETCD_CERT: not signed by its CA?) (${errorMessage(err)})`
    )
  }

  /** Whether a client certificate or a CA is set: endpoints must then be https. */
  get usesTls(): boolean {
    return this.tls.cert !== undefined || this.tls.ca !== undefined
  }

  /**
   * Refuses plain http when a certificate is set: the key would guard nothing, and the password would cross
   * in the clear.
   */
  checkEndpoint(url: URL): void {
    if (url.protocol === 'https:') return
    if (this.tls.cert !== undefined || this.tls.ca !== undefined) {
      throw new Error(
        `etcd endpoint ${url.href} is plain http while CARLOS_ETCD_CERT or CARLOS_ETCD_CA is set; write it https://`,
      )
    }
  }

  /** Whether calls carry a token. */
  get authenticates(): boolean {
    return this.user !== undefined
  }

  /**
   * The token to send, authenticating first when there is none. fetch is
   * the gateway's call of /v3/auth/authenticate (its failover, its bounds).
   */
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

  /** The token held now, if any (what the tests compare after a renewal). */
  get current(): string | undefined {
    return this.#token
  }

  /** Forgets the token etcd refused (only that one: a newer one another call got is kept). */
  forget(token: string | undefined): void {
    if (token !== undefined && this.#token === token) this.#token = undefined
  }
}
