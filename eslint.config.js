// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const MCP_SDK = { group: ['@modelcontextprotocol/*'], message: 'only src/gateway/mcp imports the MCP SDK' };
const CLIENT_NODE = {
  group: ['@kubernetes/client-node', '@kubernetes/client-node/*'],
  message: 'only src/kube, src/controller and src/backends/kubernetes import @kubernetes/client-node',
};
const KUBE_DIRS = ['src/kube/**', 'src/controller/**', 'src/backends/kubernetes/**'];

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'charts/', 'crds/', 'images/', 'eslint.config.js'] },
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
  // SDK isolation: the MCP SDK only in src/gateway/mcp; client-node only in the Kubernetes adapters.
  {
    files: ['src/**/*.ts'],
    ignores: ['src/gateway/mcp/**', ...KUBE_DIRS],
    rules: { 'no-restricted-imports': ['error', { patterns: [MCP_SDK, CLIENT_NODE] }] },
  },
  {
    files: KUBE_DIRS,
    rules: { 'no-restricted-imports': ['error', { patterns: [MCP_SDK] }] },
  },
  {
    files: ['src/gateway/mcp/**'],
    rules: { 'no-restricted-imports': ['error', { patterns: [CLIENT_NODE] }] },
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
