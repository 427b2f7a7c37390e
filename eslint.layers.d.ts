import type { Linter } from 'eslint';

export interface ImportPattern {
  group: string[];
  message: string;
}
export const LAYERS: Readonly<Record<string, readonly string[] | null>>;
export const MCP_SDK: ImportPattern;
export const CLIENT_NODE: ImportPattern;
export function layerConfigs(): Linter.Config[];
