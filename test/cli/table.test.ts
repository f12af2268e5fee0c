// The CLI's one table: columns as wide as their widest cell, two spaces
// apart, and no line ending in a blank.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { formatTable } from '../../src/cli/table.js'

void test('columns are padded to their widest cell, two spaces apart, without trailing blanks', () => {
  assert.equal(
    formatTable(
      ['HOST', 'LAYOUT', 'NOTE'],
      [
        ['a.example.com', 'nested', ''],
        ['b', 'flat', 'a long note'],
      ],
    ),
    'HOST           LAYOUT  NOTE\na.example.com  nested\nb              flat    a long note\n',
  )
})

void test('a table without rows is its head', () => {
  assert.equal(formatTable(['HOST', 'KIND'], []), 'HOST  KIND\n')
})
