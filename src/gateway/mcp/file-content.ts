/**
 * A workspace file's bytes as MCP content, the same for a session's files and a run's output
 * files: an image (PNG, JPEG, GIF, SVG) as image content, text as text, anything else as base64;
 * and a file as the contents of `resources/read`.
 */
import type { ImageContent, ReadResourceResult } from '@modelcontextprotocol/sdk/types.js';
import { imageTypeOf, mediaTypeOf, rasterImageType } from '../../api/media.js';
import { looksBinary } from '../../runner/capture.js';

/** The bytes as UTF-8 text when they are text (the output capture's test), else undefined. */
export function asText(data: Buffer): string | undefined {
  return looksBinary(data) ? undefined : data.toString('utf8');
}

export async function collect(data: AsyncIterable<Buffer>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of data) chunks.push(c);
  return Buffer.concat(chunks);
}

/** The file as image content, when it is an image. */
export function imageContent(path: string, data: Buffer): ImageContent | undefined {
  const mimeType = imageTypeOf(path, data);
  return mimeType ? { type: 'image', data: data.toString('base64'), mimeType } : undefined;
}

/** The file as `resources/read` returns it: text (an SVG too) with its type, or base64. */
export function resourceContents(
  uri: string,
  path: string,
  data: Buffer,
): ReadResourceResult['contents'][number] {
  const text = rasterImageType(data) ? undefined : asText(data);
  const type = mediaTypeOf(path, data);
  if (text !== undefined) {
    return { uri, mimeType: type === 'application/octet-stream' ? 'text/plain' : type, text };
  }
  return { uri, mimeType: type, blob: data.toString('base64') };
}
