import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { test } from 'node:test'
import { parse } from 'yaml'
import { generateOpenApi } from '../../src/openapi.js'

void test('openapi.yaml is what the route schemas generate', async () => {
  // Compiled to <outDir>/test/app/: the repository root is three levels up.
  const committed = await readFile(new URL('../../../openapi.yaml', import.meta.url), 'utf8')
  const generated = await generateOpenApi()
  assert.ok(generated === committed, 'openapi.yaml drifted from the route schemas: run `npm run build && npm run openapi` and commit it')
})

type Node = Record<string, unknown>

function isNode(v: unknown): v is Node {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

// Every property of every object schema, wherever it is nested.
function undescribed(schema: unknown, at: string, out: string[]): string[] {
  if (Array.isArray(schema)) schema.forEach((s, i) => undescribed(s, `${at}[${i}]`, out))
  if (!isNode(schema)) return out
  if (isNode(schema.properties)) {
    for (const [name, prop] of Object.entries(schema.properties)) {
      if (!isNode(prop) || typeof prop.description !== 'string') out.push(`${at}.${name}`)
    }
  }
  for (const [k, v] of Object.entries(schema)) undescribed(v, `${at}.${k}`, out)
  return out
}

void test('every operation has a summary, a description and tags, and every field a description', async () => {
  const doc: unknown = parse(await generateOpenApi())
  assert.ok(isNode(doc) && isNode(doc.paths))
  let operations = 0
  for (const [path, item] of Object.entries(doc.paths)) {
    assert.ok(isNode(item))
    for (const [method, op] of Object.entries(item)) {
      operations++
      const where = `${method.toUpperCase()} ${path}`
      assert.ok(isNode(op), where)
      assert.equal(typeof op.summary, 'string', `${where} summary`)
      assert.equal(typeof op.description, 'string', `${where} description`)
      assert.ok(Array.isArray(op.tags) && op.tags.length > 0, `${where} tags`)
      assert.ok(isNode(op.responses) && isNode(op.responses['500']), `${where} documents its 500`)
      for (const p of Array.isArray(op.parameters) ? op.parameters : []) {
        assert.ok(isNode(p) && typeof p.description === 'string', `${where} parameter ${JSON.stringify(p)}`)
      }
      assert.deepEqual(undescribed(op.responses, where, []), [], `${where}: fields without a description`)
    }
  }
  assert.ok(operations >= 6, `operations: ${operations}`)
})
