// The route schemas compile on their first use, with Fastify's own
// compilers and the app's options: a start compiles nothing, a check still
// refuses what its schema refuses and says why, and an answer is still
// serialized by its schema.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { lazyCompilers } from '../../src/routes/lazy-compilers.js'

const AJV = { customOptions: { removeAdditional: false, coerceTypes: false }, plugins: [] }

interface Lazy {
  (data: unknown): unknown
  errors?: Array<{ message?: string }>
}

void test('a validator compiles on its first check, not when the route is built', () => {
  const { buildValidator } = lazyCompilers().factory as unknown as {
    buildValidator: (ext: unknown, opts: unknown) => (r: { schema: unknown; httpPart: string }) => Lazy
  }
  const compile = buildValidator({}, AJV)
  // A schema Ajv cannot compile: building the route's validator does not fail, its first use does.
  const broken = compile({ schema: { type: 'no-such-type' }, httpPart: 'body' })
  assert.throws(() => broken({}), /no-such-type|type must be/)
  const validate = compile({
    schema: {
      type: 'object',
      properties: { awake: { type: 'array', items: { type: 'string' } } },
      required: ['awake'],
      additionalProperties: false,
    },
    httpPart: 'body',
  })
  assert.equal(validate({ awake: ['a.example.com'] }), true)
  // No coercion: a string is not turned into a one-element array.
  assert.equal(validate({ awake: 'a.example.com' }), false)
  assert.match(validate.errors?.[0]?.message ?? '', /must be array/)
  assert.equal(validate({ awake: [], extra: 1 }), false)
  assert.match(validate.errors?.[0]?.message ?? '', /additional properties/)
})

void test('a serializer compiles on its first answer and writes what its schema names', () => {
  const { buildSerializer } = lazyCompilers().factory as unknown as {
    buildSerializer: (ext: unknown, opts: unknown) => (r: { schema: unknown }) => (data: unknown) => string
  }
  const compile = buildSerializer({}, {})
  const broken = compile({ schema: { type: 'object', properties: { a: { $ref: '#/no/such' } } } })
  assert.throws(() => broken({ a: 1 }))
  const serialize = compile({
    schema: { type: 'object', properties: { host: { type: 'string' }, n: { type: 'integer' } } },
  })
  assert.equal(serialize({ host: 'a.example.com', n: 3, secret: 'x' }), '{"host":"a.example.com","n":3}')
})

void test('warm compiles now the schemas of the routes it names, and no other, and a compile that fails is left to the first request', async () => {
  const compilers = lazyCompilers()
  const { buildValidator } = compilers.factory as unknown as {
    buildValidator: (ext: unknown, opts: unknown) => (r: { schema: unknown; httpPart: string; url: string }) => Lazy
  }
  const compile = buildValidator({}, AJV)
  const hot = compile({ schema: { type: 'string', minLength: 2 }, httpPart: 'params', url: '/ready/:host' })
  // Ajv refuses an unknown format when it compiles the schema: whether, and when, it was compiled shows.
  const cold = compile({ schema: { type: 'string', format: 'counted' }, httpPart: 'params', url: '/layout/status' })
  const broken = compile({ schema: { type: 'no-such-type' }, httpPart: 'body', url: '/wakes/:host' })
  assert.equal(
    await compilers.warm(new Set(['/ready/:host', '/wakes/:host'])),
    1,
    'one made; the broken one is not counted',
  )
  assert.equal(hot('ab'), true)
  assert.equal(hot('a'), false)
  assert.throws(() => broken({}), /no-such-type|type must be/, 'the broken schema still fails its first request')
  assert.throws(
    () => cold('x'),
    /unknown format "counted"/,
    'a route warm did not name compiles on its first request, as before',
  )
})
