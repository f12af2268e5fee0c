// The route schemas' validators and serializers, compiled on their first
// use instead of when the server starts. Fastify compiles every route's
// schemas (Ajv for what comes in, fast-json-stringify for what goes out)
// before it listens: about a quarter of a second of CPU at each start, for
// routes most of which a start never sees (design §4.4). The compilers are
// Fastify's own, from the copy Fastify loads, with the options the app
// gives them; only the moment each compiles changes. A schema is compiled
// once, on its route's first request; a schema that cannot compile fails
// that request with a 500 and a logged error, and the openapi tests
// compile every schema.
import { createRequire } from 'node:module'
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

/** A factory whose compilers build the default one only when first asked, and each validator only on first use. */
function lazyValidators(): Factory<Validate> {
  return (externalSchemas, options) => {
    let compile: Compile<Validate> | undefined
    return (route) => {
      let validate: Validate | undefined
      const lazy: Validate = (data) => {
        if (validate === undefined) {
          compile ??= (fromFastify('@fastify/ajv-compiler') as () => Factory<Validate>)()(externalSchemas, options)
          validate = compile(route)
        }
        const result = validate(data)
        // Fastify reads a failed check's reasons from the function it holds.
        lazy.errors = validate.errors
        return result
      }
      return lazy
    }
  }
}

/** The same for the serializers of the answers. */
function lazySerializers(): Factory<(data: unknown) => string> {
  return (externalSchemas, options) => {
    let compile: Compile<(data: unknown) => string> | undefined
    return (route) => {
      let serialize: ((data: unknown) => string) | undefined
      return (data) => {
        if (serialize === undefined) {
          compile ??= (fromFastify('@fastify/fast-json-stringify-compiler') as () => Factory<(data: unknown) => string>)()(externalSchemas, options)
          serialize = compile(route)
        }
        return serialize(data)
      }
    }
  }
}

type CompilersFactory = NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>

/** Fastify's `schemaController.compilersFactory`, compiling on first use. */
export function lazyCompilers(): CompilersFactory {
  // Fastify types a validator as Ajv's whole function; it calls it and reads `errors`, all a lazy one has.
  return { buildValidator: lazyValidators(), buildSerializer: lazySerializers() } as unknown as CompilersFactory
}
