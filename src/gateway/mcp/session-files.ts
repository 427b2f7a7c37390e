/**
 * Session files as MCP content: the resource URI of a file (`sandpit://sessions/{id}/files/{+path}`:
 * `{path}` would stop at `/`), and a file's bytes as the content a client shows best: an image as
 * image content, text as text, anything else as base64; a large file as a resource_link, never inline.
 */
import { looksBinary } from '../../runner/capture.js';

export const SESSION_FILE_TEMPLATE = 'sandpit://sessions/{id}/files/{+path}';
/** Files up to this size come back inline from sandbox_read_file; larger ones as a resource_link. */
export const INLINE_BYTES = 256 * 1024;

export function sessionFileUri(sessionId: string, path: string): string {
  const rel = path.replace(/^\/workspace\/?/, '');
  return `sandpit://sessions/${encodeURIComponent(sessionId)}/files/${rel.split('/').map(encodeURIComponent).join('/')}`;
}

/** The session id and path of a session file URI, or undefined. */
export function parseSessionFileUri(uri: string): { sessionId: string; path: string } | undefined {
  const m = /^sandpit:\/\/sessions\/([^/]+)\/files\/(.+)$/.exec(uri);
  if (!m?.[1] || !m[2]) return undefined;
  try {
    return { sessionId: decodeURIComponent(m[1]), path: m[2].split('/').map(decodeURIComponent).join('/') };
  } catch {
    return undefined;
  }
}

const IMAGE_TYPES: readonly [string, number[]][] = [
  ['image/png', [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]],
  ['image/jpeg', [0xff, 0xd8, 0xff]],
  ['image/gif', [0x47, 0x49, 0x46, 0x38]],
];

/** The image type its first bytes declare (PNG, JPEG, GIF), else undefined. */
export function imageType(data: Buffer): string | undefined {
  return IMAGE_TYPES.find(([, magic]) => magic.every((b, i) => data[i] === b))?.[0];
}

/** The bytes as UTF-8 text when they are text (the output capture's test), else undefined. */
export function asText(data: Buffer): string | undefined {
  return looksBinary(data) ? undefined : data.toString('utf8');
}

export async function collect(data: AsyncIterable<Buffer>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of data) chunks.push(c);
  return Buffer.concat(chunks);
}
