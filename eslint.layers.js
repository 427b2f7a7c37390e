// @ts-check
/**
 * The layers of src/ (DESIGN.md §9): what each top-level folder may import. Imports point inward;
 * cmd/ wires everything. The SDKs are fenced too: the MCP SDK only in src/gateway/mcp, client-node
 * only in src/kube, and the process environment only in src/cmd and src/config.
 */

/** folder → the folders it may import (besides itself). */
export const LAYERS = {
  shared: [],
  api: ['shared'],
  policy: ['api', 'shared'],
  runner: ['api', 'shared', 'policy'],
  observability: ['api', 'shared', 'policy'],
  egress: ['api', 'shared', 'policy', 'observability'],
  kube: ['api', 'shared', 'observability'],
  config: ['api', 'shared', 'policy'],
  backends: ['api', 'shared', 'policy', 'runner', 'observability', 'kube', 'egress'],
  controller: ['api', 'shared', 'policy', 'runner', 'observability', 'kube', 'egress'],
  gateway: ['api', 'shared', 'policy', 'runner', 'observability', 'backends', 'egress'],
  cmd: null, // the composition roots: anything
};

const FOLDERS = Object.keys(LAYERS);

export const MCP_SDK = {
  group: ['@modelcontextprotocol/*'],
  message: 'only src/gateway/mcp imports the MCP SDK',
};
export const CLIENT_NODE = {
  group: ['@kubernetes/client-node', '@kubernetes/client-node/*'],
  message: 'only src/kube imports @kubernetes/client-node (it re-exports the types others need)',
};

/** The import patterns `folder` may not use: the folders outside its layer. */
function layerPatterns(folder) {
  const allowed = LAYERS[folder];
  if (allowed === null) return [];
  return FOLDERS.filter((f) => f !== folder && !allowed.includes(f)).map((f) => ({
    group: [`**/${f}`, `**/${f}/**`],
    message: `src/${folder} may import only ${allowed.length ? allowed.map((a) => `src/${a}`).join(', ') : 'nothing else in src'}: src/${f} is not below it`,
  }));
}

/** One `no-restricted-imports` per folder (rules of one name do not merge across config objects). */
export function layerConfigs() {
  const configs = FOLDERS.map((folder) => ({
    files: [`src/${folder}/**/*.ts`],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [...layerPatterns(folder), ...(folder === 'kube' ? [] : [CLIENT_NODE]), MCP_SDK],
        },
      ],
    },
  }));
  // src/gateway/mcp: the gateway's layer, and the MCP SDK.
  configs.push({
    files: ['src/gateway/mcp/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [...layerPatterns('gateway'), CLIENT_NODE] }] },
  });
  return configs;
}
