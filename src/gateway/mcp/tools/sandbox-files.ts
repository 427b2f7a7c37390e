/** sandbox_write_file, sandbox_read_file, sandbox_list_files: a session's workspace. */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { AppError } from '../../../shared/errors.js';
import type { ToolSpec } from '../tool-spec.js';
import { principalOf } from '../context.js';
import { toolResult } from '../results.js';
import { asText, collect, imageContent } from '../file-content.js';
import { INLINE_BYTES, sessionFileUri } from '../session-files.js';
import { FileEntryOutput, FileListOutput, FileReadOutput, type SessionSchemas } from '../session-schemas.js';
import { READ_ANNOTATIONS } from './get-run.js';
import { CHANGE_ANNOTATIONS } from './run-code.js';

interface WriteArgs {
  sessionId: string;
  path: string;
  content: string;
  encoding?: 'utf8' | 'base64' | undefined;
  append?: boolean | undefined;
  offset?: number | undefined;
  mode?: number | undefined;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

function decode(content: string, encoding: 'utf8' | 'base64' | undefined): Buffer {
  if (encoding !== 'base64') return Buffer.from(content, 'utf8');
  const compact = content.replace(/\s+/g, '');
  if (compact.length % 4 !== 0 || !BASE64.test(compact)) {
    throw new AppError('INVALID_REQUEST', 'content is not valid base64', {
      violations: [{ field: 'content', message: 'expected base64 (A-Z, a-z, 0-9, +, /, = padding)' }],
      hint: 'send encoding: "utf8" for text',
    });
  }
  return Buffer.from(compact, 'base64');
}

export function sandboxWriteFileTool(schemas: SessionSchemas): ToolSpec {
  return {
    name: 'sandbox_write_file',
    title: 'Write a file in a session',
    description:
      'Creates or replaces a file in the session’s workspace; append or offset write large files in parts.',
    input: schemas.write,
    output: FileEntryOutput,
    annotations: CHANGE_ANNOTATIONS,
    handler: (deps) => async (args: WriteArgs, extra) => {
      const content = decode(args.content, args.encoding);
      const entry = await deps.service.sessions.writeFile(args.sessionId, principalOf(extra, deps), {
        path: args.path,
        content,
        mode: args.mode,
        offset: args.offset,
        append: args.append,
      });
      return toolResult(
        FileEntryOutput,
        entry,
        `wrote ${content.length} bytes: ${entry.path} is ${entry.size} bytes`,
      );
    },
  };
}

export function sandboxReadFileTool(schemas: SessionSchemas): ToolSpec {
  return {
    name: 'sandbox_read_file',
    title: 'Read a file from a session',
    description: 'A file of the session’s workspace: text, an image, base64, or a link for a large file.',
    input: schemas.read,
    output: FileReadOutput,
    annotations: READ_ANNOTATIONS,
    handler: (deps) => async (args: { sessionId: string; path: string }, extra) => {
      const file = await deps.service.sessions.readFile(args.sessionId, principalOf(extra, deps), {
        path: args.path,
      });
      const uri = sessionFileUri(args.sessionId, file.entry.path);
      const facts = { path: file.entry.path, size: file.entry.size, uri };
      if (file.entry.size > INLINE_BYTES) {
        await file.data[Symbol.asyncIterator]().return?.();
        return linked(facts);
      }
      const data = await collect(file.data);
      const image = imageContent(file.entry.path, data);
      if (image) {
        return {
          content: [image],
          structuredContent: FileReadOutput.parse({ ...facts, encoding: 'none', mimeType: image.mimeType }),
        };
      }
      const text = asText(data);
      if (text !== undefined)
        return toolResult(FileReadOutput, { ...facts, encoding: 'utf8', content: text }, text);
      return toolResult(
        FileReadOutput,
        { ...facts, encoding: 'base64', content: data.toString('base64') },
        `${facts.path}: ${facts.size} bytes of binary data (base64 in structured content)`,
      );
    },
  };
}

/** A file too large to inline: a resource_link the client reads when it wants the bytes. */
function linked(facts: { path: string; size: number; uri: string }): CallToolResult {
  return {
    content: [
      { type: 'text', text: `${facts.path} is ${facts.size} bytes: read it as the resource ${facts.uri}` },
      { type: 'resource_link', uri: facts.uri, name: facts.path, size: facts.size },
    ],
    structuredContent: FileReadOutput.parse({ ...facts, encoding: 'none' }),
  };
}

export function sandboxListFilesTool(schemas: SessionSchemas): ToolSpec {
  return {
    name: 'sandbox_list_files',
    title: 'List files in a session',
    description: 'The entries of a directory in the session’s workspace, with size, type and mtime.',
    input: schemas.list,
    output: FileListOutput,
    annotations: READ_ANNOTATIONS,
    handler: (deps) => async (args: { sessionId: string; path?: string; recursive?: boolean }, extra) => {
      const entries = await deps.service.sessions.listFiles(args.sessionId, principalOf(extra, deps), args);
      const text = entries.length
        ? entries
            .map((e) => `${e.type === 'directory' ? 'd' : '-'} ${String(e.size).padStart(10)} ${e.path}`)
            .join('\n')
        : '(empty)';
      return toolResult(FileListOutput, { entries }, text);
    },
  };
}
