/**
 * Media types of workspace files (a session's, a run's outputs): images by their content (PNG,
 * JPEG, GIF by magic bytes; SVG by its name and an `<svg` element in its first bytes), anything
 * else by its extension. What the bytes declare wins over the name, so a renamed file is not shown
 * as what it is not. Pure.
 */

/** How many leading bytes `mediaTypeOf` looks at. */
export const MEDIA_HEAD_BYTES = 1024;

const MAGIC: readonly [string, readonly number[]][] = [
  ['image/png', [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]],
  ['image/jpeg', [0xff, 0xd8, 0xff]],
  ['image/gif', [0x47, 0x49, 0x46, 0x38]],
];

export const SVG_TYPE = 'image/svg+xml';

/** The image types a client is shown inline. */
const IMAGE_TYPES = new Set([...MAGIC.map(([type]) => type), SVG_TYPE]);

const BY_EXTENSION: Readonly<Record<string, string>> = {
  txt: 'text/plain',
  log: 'text/plain',
  md: 'text/markdown',
  csv: 'text/csv',
  tsv: 'text/tab-separated-values',
  json: 'application/json',
  jsonl: 'application/jsonl',
  html: 'text/html',
  htm: 'text/html',
  xml: 'application/xml',
  yaml: 'application/yaml',
  yml: 'application/yaml',
  py: 'text/x-python',
  js: 'text/javascript',
  sh: 'text/x-shellscript',
  c: 'text/x-c',
  rs: 'text/x-rust',
  pdf: 'application/pdf',
  zip: 'application/zip',
  gz: 'application/gzip',
  tar: 'application/x-tar',
  parquet: 'application/vnd.apache.parquet',
  npy: 'application/octet-stream',
};

/** The raster image type the first bytes declare (PNG, JPEG, GIF), else undefined. */
export function rasterImageType(data: Buffer): string | undefined {
  return MAGIC.find(([, magic]) => magic.every((b, i) => data[i] === b))?.[0];
}

/** Whether a file named `path` that starts with `head` is an SVG image. */
export function isSvg(path: string, head: Buffer): boolean {
  if (!/\.svg$/i.test(path)) return false;
  return /<svg[\s>]/.test(head.subarray(0, MEDIA_HEAD_BYTES).toString('latin1'));
}

/** The image type of a file (PNG, JPEG, GIF, SVG), else undefined. */
export function imageTypeOf(path: string, head: Buffer): string | undefined {
  return rasterImageType(head) ?? (isSvg(path, head) ? SVG_TYPE : undefined);
}

/** Whether a media type is one a client is shown inline as image content. */
export function imageMediaType(mediaType: string): boolean {
  return IMAGE_TYPES.has(mediaType);
}

/** The media type of a file named `path` that starts with `head`. */
export function mediaTypeOf(path: string, head: Buffer): string {
  const image = imageTypeOf(path, head);
  if (image) return image;
  const ext = /\.([A-Za-z0-9]{1,8})$/.exec(path)?.[1]?.toLowerCase();
  const byName = ext ? BY_EXTENSION[ext] : undefined;
  // A name that claims an image its bytes do not hold is not shown as one.
  return byName ?? 'application/octet-stream';
}
