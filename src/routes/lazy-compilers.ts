// The route schemas' validators and serializers, compiled on first use, not
// before listening (design §4.4): most routes are never asked after a start.
// The compilers are Fastify's own with the app's options; only the moment changes.
import { createRequire } from 'node:module'
import { setImmediate as nextTurn } from 'node:timers/promises'
import type { FastifyServerOptions } from 'fastify'

interface RouteSchema {
  schema: unknown
  method?: string
  url?: string
  httpPart?: string
}

type Validate = ((data: unknown) => unknown) & { errors?: unknown }
type Compile<F> = (route: RouteSchema) => F
type Factory<F> = (externalSchemas: unknown, options: unknown) => Compile<F>

const fromFastify = createRequire(import.meta.resolve('fastify'))

/** A compile warm() can make before the route's first request. */
interface Pending {
  url: string | undefined
  compile: () => void
}

/** Ajv's compiler is built when first asked, each validator on first use. */
function lazyValidators(pending: Pending[]): Factory<Validate> {
  return (externalSchemas, options) => {
    let compile: Compile<Validate> | undefined
    return (route) => {
      let validate: Validate | undefined
      const made = (): Validate => {
        compile ??= (fromFastify('@fastify/ajv-compiler') as () => Factory<Validate>)()(externalSchemas, options)
        validate ??= compile(route)
        return validate
      }
      pending.push({ url: route.url, compile: made })
      const lazy: Validate = (data) => {
        const v = validate ?? made()
        const result = v(data)
        // Fastify reads a failed check's reasons from the function it holds.
        lazy.errors = v.errors
        return result
      }
      return lazy
    }
  }
}

function lazySerializers(pending: Pending[]): Factory<(data: unknown) => string> {
  return (externalSchemas, options) => {
    let compile: Compile<(data: unknown) => string> | undefined
    return (route) => {
      let serialize: ((data: unknown) => string) | undefined
      const made = (): ((data: unknown) => string) => {
        compile ??= (
          fromFastify('@fastify/fast-json-stringify-compiler') as () => Factory<(data: unknown) => string>
        )()(externalSchemas, options)
        serialize ??= compile(route)
        return serialize
      }
      pending.push({ url: route.url, compile: made })
      return (data) => (serialize ?? made())(data)
    }
  }
}

type CompilersFactory = NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>

export interface LazyCompilers {
  factory: CompilersFactory
  /** A schema a turn, so a tenant's first request waits for none; answers how many. */
  warm(urls: ReadonlySet<string>): Promise<number>
}

export function lazyCompilers(): LazyCompilers {
  const pending: Pending[] = []
  return {
    // Fastify types a validator as Ajv's; it only calls it and reads `errors`.
    factory: {
      buildValidator: lazyValidators(pending),
      buildSerializer: lazySerializers(pending),
    } as unknown as CompilersFactory,
    async warm(urls) {
      let made = 0
      for (const p of pending) {
        if (p.url === undefined || !urls.has(p.url)) continue
        try {
          p.compile()
          made++
        } catch {
          // The route's first request fails with it, a 500.
        }
        await nextTurn()
      }
      return made
    },
  }
}
