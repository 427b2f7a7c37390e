/** Names of the principals sandpit itself names, which a configured token may therefore not take. */

/** The principal of `auth.token` (MCP_AUTH_TOKEN): the whole policy, no narrower scope. */
export const DEFAULT_TOKEN_PRINCIPAL = 'default';
/** The caller of a local transport (CLI, stdio MCP, HTTP without tokens). */
export const LOCAL_PRINCIPAL_NAME = 'local';

export const RESERVED_PRINCIPAL_NAMES: readonly string[] = [DEFAULT_TOKEN_PRINCIPAL, LOCAL_PRINCIPAL_NAME];
