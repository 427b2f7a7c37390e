/**
 * What a client without the SDK sends to a Streamable HTTP gateway: the Accept header of every
 * POST to /mcp, and an initialize request (the raw and hostile clients of the e2e and hostile tiers).
 */
export const MCP_ACCEPT = { Accept: 'application/json, text/event-stream' };

/** A raw MCP initialize request (id 1) from a client named `name`. */
export function rawInitialize(name = 'raw'): Record<string, unknown> {
  return {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name, version: '1' } },
  };
}
