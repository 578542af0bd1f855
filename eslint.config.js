// ESLint for the whole tree: type-aware typescript-eslint rules over the TypeScript (src, test),
// plain recommended rules over the JavaScript scripts (bench, scripts, native, bin). Layout is
// prettier's job, so no stylistic rule is enabled here.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// Node's globals the .mjs scripts use (the `globals` package is not a dependency).
const nodeGlobals = Object.fromEntries(
  [
    'AbortController',
    'AbortSignal',
    'Buffer',
    'URL',
    'URLSearchParams',
    'TextDecoder',
    'TextEncoder',
    'clearImmediate',
    'clearInterval',
    'clearTimeout',
    'console',
    'fetch',
    'globalThis',
    'performance',
    'process',
    'queueMicrotask',
    'setImmediate',
    'setInterval',
    'setTimeout',
    'structuredClone',
  ].map((name) => [name, 'readonly']),
);

export default tseslint.config(
  {
    ignores: ['dist/', 'node_modules/', 'bench/results/', 'test-artifacts/', 'native/build/', 'deploy/', 'examples/'],
  },
  {
    linterOptions: { reportUnusedDisableDirectives: 'error' },
  },
  {
    files: ['**/*.js', '**/*.mjs', 'bin/clusterdns'],
    extends: [js.configs.recommended],
    languageOptions: { ecmaVersion: 2023, sourceType: 'module', globals: nodeGlobals },
    rules: {
      'no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  {
    // Tests: the same rules without type information. Type-aware linting costs about a second
    // per 10 files here, and it is the server's code, not its tests, whose promises must not float.
    files: ['test/**/*.ts'],
    extends: [js.configs.recommended, ...tseslint.configs.recommended],
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' },
      ],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
    },
  },
  {
    files: ['src/**/*.ts'],
    extends: [js.configs.recommended, ...tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      // The program of src alone (tsconfig.build.json): the whole project's program, tests included,
      // cost a third of the run for files these rules never look at.
      parserOptions: { project: ['./tsconfig.build.json'], tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          // node:test's test/describe return a promise the runner itself tracks; awaiting them
          // inside a file would serialise suites for nothing.
          allowForKnownSafeCalls: [
            { from: 'package', package: 'node:test', name: ['test', 'it', 'describe', 'suite'] },
          ],
        },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' },
      ],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      // Rejecting with what was caught or an AbortSignal's reason (typed any) passes the original error on.
      '@typescript-eslint/prefer-promise-reject-errors': [
        'error',
        { allowThrowingAny: true, allowThrowingUnknown: true },
      ],
      // Off: an interface method that returns a Promise is written `async` so that a throw
      // inside it becomes a rejection, even when the body has nothing to await.
      '@typescript-eslint/require-await': 'off',
      // Off: the no-unsafe-* family (values typed `any`) took a third of the rules' time and
      // kept `npm run lint` over a reviewer's time limit; tsc's strict mode already refuses
      // implicit any, so what they catch is explicit `any` from JSON.parse and catch clauses.
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
    },
  },
);
