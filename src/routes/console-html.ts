// HTML escaped by default, the console's one way to write markup: report text
// can never become markup, and control bytes and bidi overrides show escaped.
import { printable } from '../domain/printable.js'

/** Safe markup, made by `html`, `trusted` or `fill` only. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text
  }
}

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }

/** Text as it may stand in an element or in a quoted attribute. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ENTITIES[c] ?? c)
}

export type Interpolated = Html | string | number | boolean | null | undefined | readonly Interpolated[]

function write(v: Interpolated): string {
  if (v === null || v === undefined || v === false) return ''
  if (v instanceof Html) return v.text
  if (Array.isArray(v)) return (v as readonly Interpolated[]).map(write).join('')
  return escapeHtml(printable(String(v)))
}

/** The literal parts are markup; every value but Html is escaped. */
export function html(parts: TemplateStringsArray, ...values: Interpolated[]): Html {
  let out = parts[0] ?? ''
  values.forEach((v, i) => (out += write(v) + (parts[i + 1] ?? '')))
  return new Html(out)
}

/** Text the package ships, never from a request or the report. */
export function trusted(text: string): Html {
  return new Html(text)
}

/** One pass, so a hostname `{{script}}` stays text; a missing value throws. */
export function fill(template: string, values: Readonly<Record<string, Html>>): Html {
  return new Html(
    template.replace(/\{\{([a-z]+)\}\}/g, (_m, name: string) => {
      const v = values[name]
      if (v === undefined) throw new Error(`the console template names {{${name}}}, which has no value`)
      return v.text
    }),
  )
}
