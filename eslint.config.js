// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

import { layerConfigs } from './eslint.layers.js';

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
    languageOptions: {
      parserOptions: {
        // The test reporter is plain JavaScript (node loads reporters before tsx's hooks).
        projectService: { allowDefaultProject: ['test/support/*.mjs'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
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
