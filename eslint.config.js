// Typed linting: the rules that matter most here (a promise nobody awaits,
// a misused async callback) need the type checker, which is why the build
// stays on TypeScript 5 rather than the native TypeScript 7 compiler.
//
// The layering of docs/architecture.md is checked here too, with ESLint's
// own no-restricted-imports (static imports and `export … from`) and
// no-restricted-syntax (dynamic `import()`), one block per layer. Both match
// the import string, not the resolved file, so every pattern allows any
// number of `../` in front: '../infra/x.js' and '../../infra/x.js' are both
// caught, from src/domain/x.ts and from a file a folder deeper.
import js from '@eslint/js'
import tseslint from 'typescript-eslint'

/** Any relative way up, then one of names as a folder (`infra/…`) or as a module (`agent.js`). */
function reaching(folders, modules) {
  const alternatives = []
  if (folders.length > 0) alternatives.push(`(?:${folders.join('|')})(?:/|\\.js$)`)
  if (modules.length > 0) alternatives.push(`(?:${modules.join('|')})\\.js$`)
  return `^(?:\\.\\./)+(?:${alternatives.join('|')})`
}

/**
 * One layer's rule: the files it covers, the import strings they may not
 * use, and the message a break prints (it names the rule, so the reader
 * knows which line of docs/architecture.md was crossed).
 */
function layer({ files, forbidden, packages = [], message }) {
  // esquery's regex literal cannot hold a `/`, even escaped: \x2F is one.
  const dynamic = forbidden.map((source) => ({
    selector: `ImportExpression[source.value=/${source.replaceAll('/', '\\x2F')}/]`,
    message,
  }))
  return {
    files,
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: packages.map((name) => ({ name, message })),
          patterns: forbidden.map((regex) => ({ regex, message })),
        },
      ],
      'no-restricted-syntax': ['error', ...dynamic],
    },
  }
}

const layering = [
  layer({
    files: ['src/domain/**/*.ts'],
    forbidden: [
      reaching(
        ['infra', 'routes', 'agent', 'cli', 'metrics', 'report'],
        ['server', 'app', 'main', 'config', 'metrics', 'agent-api', 'logger', 'openapi'],
      ),
    ],
    // The rules do no I/O: a file, a socket or a database is an adapter's.
    packages: [
      'node:fs',
      'node:fs/promises',
      'fs',
      'fs/promises',
      'node:net',
      'node:http',
      'node:child_process',
      'better-sqlite3',
      'undici',
      'fastify',
    ],
    message:
      'layering (docs/architecture.md): src/domain imports nothing from src/infra, src/routes, src/agent, src/cli, ' +
      'src/metrics, src/report or the ' +
      'entry points, of the top-level files only src/errors.ts, and does no I/O; name what it needs in src/domain/ports.ts.',
  }),
  layer({
    files: ['src/routes/**/*.ts'],
    forbidden: [reaching(['infra', 'agent', 'cli'], ['server', 'main'])],
    message:
      'layering (docs/architecture.md): src/routes imports no adapter from src/infra and no part of the agent; ' +
      'a route asks the agent through src/agent-api.ts.',
  }),
  layer({
    files: ['src/infra/**/*.ts'],
    forbidden: [reaching(['routes', 'agent', 'cli', 'report'], ['server', 'app', 'main'])],
    message:
      'layering (docs/architecture.md): src/infra knows no route, no part of the agent, no command and not the report; ' +
      'an adapter implements a port of src/domain/ports.ts and is handed in by src/server.ts.',
  }),
  // The report sits between the rules and those who serve it: built from
  // the domain's words, read by the routes, the agent (the row gauges, the
  // box's summary) and /metrics; it opens nothing itself.
  layer({
    files: ['src/report/**/*.ts'],
    forbidden: [reaching(['infra', 'routes', 'agent', 'cli'], ['server', 'app', 'main'])],
    message:
      'layering (docs/architecture.md): src/report builds the report from src/domain and is read by the routes, ' +
      'the agent and /metrics; it imports no adapter from src/infra, no route, no part of the agent and no command.',
  }),
  layer({
    files: ['src/metrics/**/*.ts'],
    forbidden: [reaching(['infra', 'routes', 'agent', 'cli'], ['server', 'app', 'main'])],
    message:
      'layering (docs/architecture.md): src/metrics defines and keeps the series; it takes its label values from ' +
      'src/domain and imports no adapter, route, part of the agent or command: they call it.',
  }),
]

// The budget of docs/architecture.md ("The budget"): a function reads on one
// screen (80 lines of code, blank lines and comments not counted) and has no
// more branches than a reviewer can hold at once (a cyclomatic complexity of
// 20). A file is as long as its one concern needs. bench/ and test/ are
// outside it: a test's body is its whole story and a benchmark's harness is
// one long sequence by nature; a later change may bring bench/ under it.
const budget = {
  files: ['src/**/*.ts', 'scripts/**/*.mjs'],
  rules: {
    'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true, IIFEs: true }],
    complexity: ['error', 20],
  },
}

export default tseslint.config(
  // A disable that no longer silences anything is a stale excuse: an error.
  { linterOptions: { reportUnusedDisableDirectives: 'error' } },
  { ignores: ['dist/**', 'dist-*/**', 'node_modules/**', 'data/**', 'deploy/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      'no-empty': ['error', { allowEmptyCatch: false }],
    },
  },
  ...layering,
  budget,
  {
    files: ['**/*.js', '**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
  },
)
