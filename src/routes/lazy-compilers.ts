// The route schemas' validators and serializers, compiled on their first
// use instead of when the server starts (design §4.4). Fastify compiles every route's
// schemas (Ajv for what comes in, fast-json-stringify for what goes out)
// before it listens: about a quarter of a second of CPU at each start, for
// routes most of which a start never sees (design §4.4). The compilers are
// Fastify's own, from the copy Fastify loads, with the options the app
// gives them; only the moment each compiles changes. A schema is compiled
// once, on its route's first request or when warm() names its route (the
// activator's routes, once the agent is ready); a schema that cannot
// compile fails its route's first request with a 500 and a logged error.
// Ajv does not check a schema against the meta-schema as it compiles it
// (src/app.ts): test/app/route-schemas.test.ts checks every request schema.
import { createRequire } from 'node:module'
import { setImmediate as nextTurn } from 'node:timers/promises'
import type { FastifyServerOptions } from 'fastify'

/** What Fastify hands a validator compiler: the schema and where it applies. */
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

/** A compile not yet made, with the route it is for: what warm() can make before the route's first request. */
interface Pending {
  url: string | undefined
  compile: () => void
}

/** A factory whose compilers build the default one only when first asked, and each validator only on first use. */
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

/** The same for the serializers of the answers. */
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
  /** Fastify's `schemaController.compilersFactory`, compiling on first use. */
  factory: CompilersFactory
  /**
   * Compiles now every schema of the routes at urls, one a turn of the
   * event loop: the routes an activator asks on a tenant's first request
   * are made ready once the agent is, so the first such request does not
   * wait for a compiler (tens of milliseconds). Answers how many it made.
   */
  warm(urls: ReadonlySet<string>): Promise<number>
}

export function lazyCompilers(): LazyCompilers {
  const pending: Pending[] = []
  return {
    // Fastify types a validator as Ajv's whole function; it calls it and reads `errors`, all a lazy one has.
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
          // Left for the route's first request, which fails with it as it would have.
        }
        await nextTurn()
      }
      return made
    },
  }
}
