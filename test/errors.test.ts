// The error catalogue: every entry carries its code and status, the CLI's
// exit rule and the HTTP status come from one place each, and an unknown
// thrown value still has a message.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { requireValidHost } from '../src/domain/hostname.js'
import {
  AgentUnreachable,
  AppError,
  ConfigError,
  errorMessage,
  errors,
  exitStatusOf,
  httpStatusOf,
  InvalidHostError,
  UsageError,
} from '../src/errors.js'

void test('every factory makes a coded AppError with an HTTP status', () => {
  const made = [
    errors.badRequest('x'),
    errors.unauthorized('x'),
    errors.forbidden('x'),
    errors.notFound('x'),
    errors.noRoute('GET', '/x'),
    errors.conflict('x'),
    errors.payloadTooLarge(10),
    errors.unsupportedMediaType('text/plain'),
    errors.invalidJson(),
    errors.emptyJson(),
    errors.clientError(405, 'x'),
    errors.invalidHost('A', 'upper case'),
    errors.hostExists('a'),
    errors.invalidBoxLabel('B', 'upper case'),
    errors.intentUnreadable('x'),
    errors.notReady('recovering'),
    errors.tooManyWaiters('a.example.com', 'for this host'),
    errors.inheritedSocket('LISTEN_FDS=2'),
    errors.notARegistry('/tmp/x.db', 'not SQLite'),
    errors.restoreAgentRunning('/data', 'pid 1'),
    errors.backupExists('/tmp/x.db'),
    errors.convergeTimeout(5),
    errors.internal(),
    errors.usage('x'),
    errors.agentUnreachable('x'),
    errors.agentAnswered('GET /x', 503, 'not_ready', 'x'),
    errors.mintRefused('a', new Error('x')),
    errors.journalOutsideLayout('../x', 'has a `..` in it'),
    errors.journalUnreadable('layout/a.journal', 'is not JSON'),
    errors.journalUnsettled('layout/_batch-7.journal', [{ host: 'a', found: 'x', todo: 'y' }], 2),
    errors.config('X=1: no'),
  ]
  for (const err of made) {
    assert.ok(err instanceof AppError, err.message)
    assert.match(err.code, /^[a-z_]+$/, err.message)
    assert.ok(err.statusCode >= 400 && err.statusCode < 600, err.code)
  }
})

void test('an invalid host is one thing: errors.invalidHost, requireValidHost and InvalidHostError', () => {
  const err = errors.invalidHost('A.example.com', 'hostname must be lower case')
  assert.ok(err instanceof InvalidHostError)
  assert.equal(err.code, 'invalid_host')
  assert.equal(err.statusCode, 400)
  assert.equal(err.host, 'A.example.com')
  assert.throws(() => requireValidHost('A.example.com'), {
    name: 'InvalidHostError',
    code: 'invalid_host',
    message: err.message,
  })
})

void test('one exit rule: a usage error exits 2, anything else 1', () => {
  assert.equal(exitStatusOf(new UsageError('x')), 2)
  assert.equal(exitStatusOf(errors.usage('x')), 2)
  for (const err of [
    new AgentUnreachable('x'),
    new ConfigError('x'),
    errors.conflict('x'),
    new Error('x'),
    'a string',
  ]) {
    assert.equal(exitStatusOf(err), 1, String(err))
  }
})

void test("one HTTP rule: a catalogue error's own status, 500 for anything else", () => {
  assert.equal(httpStatusOf(errors.notReady('starting')), 503)
  assert.equal(httpStatusOf(errors.clientError(405, 'x')), 405)
  assert.equal(httpStatusOf(new Error('disk on fire')), 500)
  assert.equal(httpStatusOf(undefined), 500)
})

void test('mintRefused keeps the code of its cause, or says mint_failed', () => {
  assert.equal(errors.mintRefused('a', errors.intentUnreadable('x')).code, 'intent_unreadable')
  const plain = errors.mintRefused('a.example.com', new Error('boom'))
  assert.equal(plain.code, 'mint_failed')
  assert.equal(plain.statusCode, 503)
  assert.match(plain.message, /^refused to mint paths for a\.example\.com: boom; give --dir and --socket/)
})

void test('errorMessage: an Error, or the value as text', () => {
  assert.equal(errorMessage(new Error('x')), 'x')
  assert.equal(errorMessage('plain'), 'plain')
  assert.equal(errorMessage(42), '42')
})
