/**
 * Image references and the allowlist. References are normalised (`docker.io/library/python` →
 * `python:latest`) before matching so that spelling variants cannot slip past an entry.
 */
const COMPONENT = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const HOST = '(?:[a-zA-Z0-9-]+(?:\\.[a-zA-Z0-9-]+)*(?::[0-9]+)?/)';
const REFERENCE = new RegExp(
  `^(${HOST}?${COMPONENT}(?:/${COMPONENT})*)(?::([\\w][\\w.-]{0,127}))?(?:@(sha256:[a-f0-9]{64}))?$`,
);

export interface ImageRef {
  name: string;
  tag?: string;
  digest?: string;
}

export function parseImageRef(ref: string): ImageRef | undefined {
  if (ref.length > 255) return undefined;
  const m = REFERENCE.exec(ref);
  if (!m?.[1]) return undefined;
  let name = m[1];
  if (name.startsWith('docker.io/')) name = name.slice('docker.io/'.length);
  if (name.startsWith('library/') && name.split('/').length === 2) name = name.slice('library/'.length);
  return { name, ...(m[2] ? { tag: m[2] } : {}), ...(m[3] ? { digest: m[3] } : {}) };
}

/** The canonical text of a reference: `name:tag` (default tag `latest`), plus `@digest` if given. */
export function normaliseImage(ref: string): string | undefined {
  const parsed = parseImageRef(ref);
  if (!parsed) return undefined;
  const tag = parsed.tag ?? (parsed.digest ? undefined : 'latest');
  return `${parsed.name}${tag ? `:${tag}` : ''}${parsed.digest ? `@${parsed.digest}` : ''}`;
}

/**
 * An entry matches exactly (after normalisation), or by prefix when it ends in `*`
 * (`sandpit/*`, `registry.local:5000/team/*`).
 */
export function imageAllowed(ref: string, allowlist: readonly string[]): boolean {
  const image = normaliseImage(ref);
  if (!image) return false;
  return allowlist.some((entry) => {
    if (entry.endsWith('*')) return image.startsWith(entry.slice(0, -1));
    return normaliseImage(entry) === image;
  });
}
