/**
 * Output files of a run (issue 18): what a request may name (`outputs`: workspace paths or
 * globs), the caps on what is collected, and what a result says of every file collected and
 * every entry or file that was not. Nothing over a cap is dropped silently: it is named, with the
 * cap. Pure.
 */
import * as z from 'zod';
import { imageMediaType, mediaTypeOf } from './media.js';

/** The caps of issue 18; the policy may lower them, never raise them past what a result can carry. */
export interface OutputCaps {
  /** Files collected at most. */
  maxFiles: number;
  /** Bytes of all collected files together. */
  maxBytes: number;
  /** The largest image a result shows inline (MCP image content); larger ones are links. */
  inlineImageBytes: number;
  /** Images a result shows inline at most; the rest are links. */
  inlineImages: number;
}

export const DEFAULT_OUTPUT_CAPS: OutputCaps = {
  maxFiles: 32,
  maxBytes: 16 * 1024 ** 2,
  inlineImageBytes: 1024 ** 2,
  inlineImages: 4,
};

/** Entries an `outputs` list may have. */
export const MAX_OUTPUT_ENTRIES = 32;
const MAX_ENTRY_LENGTH = 1024;

export const OutputEntrySchema = z
  .string()
  .min(1)
  .max(MAX_ENTRY_LENGTH)
  // eslint-disable-next-line no-control-regex
  .refine((s) => !/[\u0000-\u001f\u007f]/.test(s), { message: 'must not contain control characters' })
  .describe('A workspace path or glob (*, ?, [..], ** for any depth), e.g. plot.png, out/*.csv');

export const OutputsRequestSchema = z
  .array(OutputEntrySchema)
  .max(MAX_OUTPUT_ENTRIES)
  .describe(
    "Files to return after the program exits (at most 32 files, 16 MiB in all); the template's default when absent (python-data: top-level *.png, *.jpg, *.svg), none when empty",
  );

/** Why an entry of `outputs`, or a file it matched, was not collected. */
export const SKIP_REASONS = [
  /** An absolute path, a `..`, or a symlink that leads out of the workspace. */
  'OutsideWorkspace',
  /** Nothing in the workspace matches it. */
  'NoMatch',
  /** It names a directory, a FIFO, a device or a socket. */
  'NotAFile',
  /** Past the cap on files. */
  'TooManyFiles',
  /** Past the cap on bytes in all. */
  'TooLarge',
  /** A name that cannot be carried safely: not UTF-8, control characters, too long or too deep. */
  'NameNotAllowed',
  /** The search of the workspace for a glob stopped at its bound on entries. */
  'SearchLimit',
  /** It could not be read. */
  'Unreadable',
] as const;
export const SkipReasonSchema = z.enum(SKIP_REASONS);
export type SkipReason = z.infer<typeof SkipReasonSchema>;

export const OutputFileSchema = z.object({
  path: z.string().describe('Workspace-relative path'),
  bytes: z.number().int().min(0).describe('Size in bytes'),
  mimeType: z.string().describe('Media type, from the content and the name'),
  delivery: z
    .enum(['image', 'link'])
    .describe('image: shown inline as image content (MCP); link: read as a resource or over REST'),
  note: z.string().optional().describe('Why an image is a link, when it is one'),
});
export type OutputFile = z.infer<typeof OutputFileSchema>;

export const OutputSkipSchema = z.object({
  entry: z.string().describe('The outputs entry, or the file it matched, that was not collected'),
  reason: SkipReasonSchema,
  message: z.string().describe('What happened, with the cap when one was reached'),
});
export type OutputSkip = z.infer<typeof OutputSkipSchema>;

export const RunOutputsSchema = z.object({
  files: z.array(OutputFileSchema).describe('Files collected'),
  skipped: z.array(OutputSkipSchema).describe('Entries and files not collected, each with its reason'),
  bytes: z.number().int().min(0).describe('Bytes of the collected files'),
});
export type RunOutputs = z.infer<typeof RunOutputsSchema>;

/** An entry whose path can never be in the workspace (absolute, or a `..` segment): why, else undefined. */
export function refusedEntry(entry: string): OutputSkip | undefined {
  if (entry.startsWith('/')) {
    return {
      entry,
      reason: 'OutsideWorkspace',
      message: 'an absolute path: give it relative to the workspace',
    };
  }
  if (entry.split('/').includes('..')) {
    return { entry, reason: 'OutsideWorkspace', message: "'..' leads out of the workspace" };
  }
  return undefined;
}

/** A file the sandbox returned: its path, size and first bytes (enough to tell its type). */
export interface CollectedFile {
  path: string;
  bytes: number;
  head: Buffer;
}

/**
 * What a result says of a run's outputs: each collected file with its type and how it is shown
 * (the first `inlineImages` images up to `inlineImageBytes` inline, others as links, each saying
 * why), and every skip.
 */
export function buildRunOutputs(
  collected: readonly CollectedFile[],
  skipped: readonly OutputSkip[],
  caps: OutputCaps,
): RunOutputs {
  let images = 0;
  const files = collected.map((f): OutputFile => {
    const mimeType = mediaTypeOf(f.path, f.head);
    const base = { path: f.path, bytes: f.bytes, mimeType };
    if (!imageMediaType(mimeType)) return { ...base, delivery: 'link' };
    if (f.bytes > caps.inlineImageBytes) {
      return {
        ...base,
        delivery: 'link',
        note: `over the ${formatCap(caps.inlineImageBytes)} cap on an inline image: read it as a resource`,
      };
    }
    if (images >= caps.inlineImages) {
      return {
        ...base,
        delivery: 'link',
        note: `a result shows ${caps.inlineImages} images inline at most: read it as a resource`,
      };
    }
    images++;
    return { ...base, delivery: 'image' };
  });
  return { files, skipped: [...skipped], bytes: collected.reduce((n, f) => n + f.bytes, 0) };
}

function formatCap(bytes: number): string {
  return bytes % 1024 ** 2 === 0 ? `${bytes / 1024 ** 2} MiB` : `${bytes} bytes`;
}
