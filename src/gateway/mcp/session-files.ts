/**
 * Workspace files as MCP resources: a session's (`sandpit://sessions/{id}/files/{+path}`) and a
 * run's output files (`sandpit://runs/{id}/files/{+path}`; `{path}` would stop at `/`). A large
 * session file comes back as a resource_link, never inline. How a file's bytes become content is
 * file-content.ts's.
 */

/** Whose workspace a file URI names. */
export type FileScope = 'sessions' | 'runs';

export const SESSION_FILE_TEMPLATE = 'sandpit://sessions/{id}/files/{+path}';
export const RUN_FILE_TEMPLATE = 'sandpit://runs/{id}/files/{+path}';
/** Files up to this size come back inline from sandbox_read_file; larger ones as a resource_link. */
export const INLINE_BYTES = 256 * 1024;

export function fileUri(scope: FileScope, id: string, path: string): string {
  const rel = path.replace(/^\/workspace\/?/, '');
  return `sandpit://${scope}/${encodeURIComponent(id)}/files/${rel.split('/').map(encodeURIComponent).join('/')}`;
}

export const sessionFileUri = (sessionId: string, path: string): string =>
  fileUri('sessions', sessionId, path);

/** The id and path of a file URI of `scope`, or undefined. */
export function parseFileUri(scope: FileScope, uri: string): { id: string; path: string } | undefined {
  const m = new RegExp(`^sandpit://${scope}/([^/]+)/files/(.+)$`).exec(uri);
  if (!m?.[1] || !m[2]) return undefined;
  try {
    return { id: decodeURIComponent(m[1]), path: m[2].split('/').map(decodeURIComponent).join('/') };
  } catch {
    return undefined;
  }
}
