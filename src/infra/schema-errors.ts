// What a TypeBox schema refused, in words an operator can act on: the field and what was wrong with it, every one,
// on one line. Fixed choices are named, known patterns said in words.
import type { TSchema } from 'typebox'
import { Value } from '../domain/typebox.js'

const PATTERN_WORDS: Record<string, string> = {
  '^[A-Za-z0-9._-]+$': 'letters, digits, dots, underscores and hyphens only',
}

const shown = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v))

export function schemaErrors(schema: TSchema, value: unknown): string {
  const errors = [...Value.Errors(schema, value)]
  // Each anyOf's branch constants, to name the choices.
  const choices = new Map<string, unknown[]>()
  for (const e of errors) {
    if (e.keyword !== 'const' || !/\/anyOf\/[0-9]+$/.test(e.schemaPath)) continue
    const key = `${e.instancePath}|${e.schemaPath.replace(/\/anyOf\/[0-9]+$/, '')}`
    choices.set(key, [...(choices.get(key) ?? []), (e.params as { allowedValue?: unknown }).allowedValue])
  }
  const why: string[] = []
  for (const e of errors) {
    const field = e.instancePath === '' ? 'record' : e.instancePath.slice(1)
    // additionalProperties: false reports each extra key twice; the keyword error names them all.
    if (e.keyword === 'boolean') continue
    if (e.keyword === 'additionalProperties') {
      why.push(`unknown field(s) ${e.params.additionalProperties.join(', ')}`)
      continue
    }
    if (e.keyword === 'const' && /\/anyOf\/[0-9]+$/.test(e.schemaPath)) continue
    if (e.keyword === 'anyOf') {
      const values = choices.get(`${e.instancePath}|${e.schemaPath}`)
      why.push(
        values !== undefined && values.length > 0
          ? `${field} must be one of ${values.map(shown).join(', ')}`
          : `${field} ${e.message}`,
      )
      continue
    }
    if (e.keyword === 'const') {
      why.push(`${field} must be ${shown((e.params as { allowedValue?: unknown }).allowedValue)}`)
      continue
    }
    if (e.keyword === 'pattern') {
      const pattern = String((e.params as { pattern?: unknown }).pattern)
      why.push(`${field} must be ${PATTERN_WORDS[pattern] ?? `text matching ${pattern}`}`)
      continue
    }
    why.push(`${field} ${e.message}`)
  }
  return why.join('; ')
}
