/**
 * Sizes and CPU amounts as people write them: Docker style (`512m`, `1g`), Kubernetes style
 * (`512Mi`, `500m` CPU) or plain numbers. Sizes use binary multiples throughout, as Docker does.
 */
const SIZE_UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1024,
  kb: 1024,
  ki: 1024,
  kib: 1024,
  m: 1024 ** 2,
  mb: 1024 ** 2,
  mi: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1024 ** 3,
  gi: 1024 ** 3,
  gib: 1024 ** 3,
  t: 1024 ** 4,
  ti: 1024 ** 4,
};

export const SIZE_FORM = 'a size like 512m, 1g, 256Mi or a number of bytes';
export const CPU_FORM = 'a CPU amount like 1, 0.5 or 500m';

/** Parses a size to bytes; returns undefined when the text is not a size. */
export function parseSize(value: string | number): number | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 0 ? value : undefined;
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(value);
  if (!m) return undefined;
  const unit = SIZE_UNITS[(m[2] ?? '').toLowerCase()];
  if (unit === undefined) return undefined;
  const bytes = Math.floor(Number(m[1]) * unit);
  return Number.isSafeInteger(bytes) ? bytes : undefined;
}

/** Parses a CPU amount to millicores; returns undefined when the text is not one. */
export function parseCpu(value: string | number): number | undefined {
  if (typeof value === 'number') {
    const milli = Number.isFinite(value) ? Math.round(value * 1000) : 0;
    return milli > 0 ? milli : undefined;
  }
  const m = /^\s*(\d+(?:\.\d+)?)\s*(m?)\s*$/.exec(value);
  if (!m) return undefined;
  const milli = m[2] === 'm' ? Math.round(Number(m[1])) : Math.round(Number(m[1]) * 1000);
  return milli > 0 ? milli : undefined;
}

/** Renders bytes the way Kubernetes quantities read best (`512Mi`), falling back to plain bytes. */
export function formatSize(bytes: number): string {
  for (const [suffix, unit] of [
    ['Gi', 1024 ** 3],
    ['Mi', 1024 ** 2],
    ['Ki', 1024],
  ] as const) {
    if (bytes >= unit && bytes % unit === 0) return `${bytes / unit}${suffix}`;
  }
  return String(bytes);
}

/** Renders millicores as a Kubernetes CPU quantity (`1`, `500m`). */
export function formatCpu(milli: number): string {
  return milli % 1000 === 0 ? String(milli / 1000) : `${milli}m`;
}
