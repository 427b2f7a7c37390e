// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

import { CLIENT_NODE, layerConfigs } from './eslint.layers.js';

/** TRANSITIONAL (see below): a folder's layer patterns without the client-node fence. */
function transitionalPatterns(folder) {
  const layer = layerConfigs().find((c) => c.files[0] === `src/${folder}/**/*.ts`);
  return layer.rules['no-restricted-imports'][1].patterns.filter((p) => p !== CLIENT_NODE);
}

export default tseslint.config(
  {
    ignores: [
      'dist/',
      'node_modules/',
      'charts/',
      'crds/',
      'images/',
      'eslint.config.js',
      'eslint.layers.js',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/only-throw-error': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-console': 'error',
    },
  },
  {
    // Inward dependencies: only composition roots wire transports, SDKs and the process environment.
    files: ['src/**/*.ts'],
    ignores: ['src/cmd/**', 'src/config/**'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: "MemberExpression[object.name='process'][property.name='env']",
          message: 'read env only in src/cmd or src/config',
        },
      ],
    },
  },
  // Layers and SDK fences (eslint.layers.js).
  ...layerConfigs(),
  {
    // Code over these is split, not exempted.
    files: ['src/**/*.ts'],
    rules: { complexity: ['error', 15], 'max-params': ['error', 4] },
  },
  {
    // TRANSITIONAL, issue 12 in progress: the Kubernetes side moves client-node behind src/kube and
    // splits these files. This block goes when that lands; nothing else may be added to it.
    files: [
      'src/controller/**/*.ts',
      'src/backends/kubernetes/**/*.ts',
      'src/kube/**/*.ts',
      'src/api/v1alpha1/crd.ts',
    ],
    rules: { complexity: 'off', 'max-params': 'off' },
  },
  {
    files: ['src/controller/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: transitionalPatterns('controller') }] },
  },
  {
    files: ['src/backends/kubernetes/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: transitionalPatterns('backends') }] },
  },
  {
    files: ['src/cmd/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts', 'scripts/**/*.ts'],
    rules: { 'no-console': 'off' },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            {
              from: 'package',
              package: 'node:test',
              name: ['test', 'it', 'describe', 'suite', 'before', 'after', 'beforeEach', 'afterEach'],
            },
          ],
        },
      ],
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
);
