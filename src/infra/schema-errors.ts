// What a TypeBox schema refused, in words an operator can act on: the field
// and what was wrong with it, every one, on one line.
import type { TSchema } from 'typebox'
import Value from 'typebox/value'

export function schemaErrors(schema: TSchema, value: unknown): string {
  const why: string[] = []
  for (const e of Value.Errors(schema, value)) {
    // additionalProperties: false reports each extra key twice; the keyword error names them all.
    if (e.keyword === 'boolean') continue
    if (e.keyword === 'additionalProperties') {
      why.push(`unknown field(s) ${e.params.additionalProperties.join(', ')}`)
      continue
    }
    why.push(`${e.instancePath === '' ? 'record' : e.instancePath.slice(1)} ${e.message}`)
  }
  return why.join('; ')
}
