// The hostname rule: its one-test fast path for valid names says yes to
// exactly the names the label-by-label rule accepts, and a refused name
// still says why.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { hostError } from '../../src/domain/hostname.js'

/** The rule written out as design §2 states it, label by label. */
function valid(host: string): boolean {
  if (host.length === 0 || Buffer.byteLength(host) > 253 || host !== host.toLowerCase()) return false
  return host.split('.').every((l) => l.length > 0 && l.length <= 63 && /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/.test(l))
}

const label = (n: number, c = 'a'): string => c.repeat(n)

const NAMES = [
  'a',
  'a.example.com',
  't01.example.com',
  'x-1.y-2.z',
  '0.0',
  `${label(63)}.com`,
  `${label(64)}.com`,
  [label(63), label(63), label(63), label(61)].join('.'),
  [label(63), label(63), label(63), label(62)].join('.'),
  '',
  '.',
  'a.',
  '.a',
  'a..b',
  '-a.com',
  'a-.com',
  'A.example.com',
  'a_b.com',
  'a b.com',
  'é.com',
  'a.com\n',
  'a.-b',
  '1-2-3',
]

void test('the fast path and the label-by-label rule agree on every name', () => {
  // Every name up to three characters over a small alphabet, and the edge cases above.
  const alphabet = ['a', '0', '-', '.', 'A', '_']
  const names = [...NAMES]
  for (const x of alphabet) for (const y of ['', ...alphabet]) for (const z of ['', ...alphabet]) names.push(x + y + z)
  for (const name of names) assert.equal(hostError(name) === null, valid(name), JSON.stringify(name))
})

void test('a refused name says why', () => {
  assert.equal(hostError(''), 'hostname is empty')
  assert.equal(hostError('A.example.com'), 'hostname must be lower case')
  assert.equal(hostError('a..b'), 'hostname has an empty label')
  assert.match(hostError(`${label(64)}.com`) ?? '', /is over 63 bytes/)
  assert.match(hostError([label(63), label(63), label(63), label(62)].join('.')) ?? '', /254 bytes, over 253/)
  assert.match(hostError('a_b.com') ?? '', /not a-z, 0-9 and inner hyphens/)
})
