/**
 * MCP over stdio: stdout carries only JSON-RPC (logs go to stderr); ends when stdin ends or `signal`
 * aborts. Each line from the client is checked as the HTTP boundary checks a body before the SDK's
 * transport sees it: a line over `maxLineBytes`, not UTF-8, not JSON, a batch, or not a JSON-RPC
 * message is answered with a JSON-RPC error, and the server reads on. (The SDK's reader drops such a
 * line without a word, so its caller waits forever, and closes the server at a line over 10 MiB.)
 */
import { isUtf8 } from 'node:buffer';
import { Transform, type Readable, type TransformCallback, type Writable } from 'node:stream';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { JSONRPCMessageSchema } from '@modelcontextprotocol/sdk/types.js';
import { jsonRpcError } from '../http/errors.js';

export interface StdioOptions {
  signal: AbortSignal;
  /** The longest line (one message) taken; the HTTP body limit. */
  maxLineBytes: number;
  stdin?: Readable;
  stdout?: Writable;
}

export async function serveStdio(server: McpServer, options: StdioOptions): Promise<void> {
  const stdin = options.stdin ?? process.stdin;
  const stdout = options.stdout ?? process.stdout;
  const before = server.server.onclose;
  const closed = new Promise<void>((resolve) => {
    server.server.onclose = () => {
      before?.();
      resolve();
    };
  });
  const close = (): void => void server.close();
  const lines = new CheckedLines(options.maxLineBytes, (answer) =>
    stdout.write(`${JSON.stringify(answer)}\n`),
  );
  stdin.pipe(lines);
  // Lines come through one at a time, each within the limit: the SDK's buffer never fills.
  await server.connect(
    new StdioServerTransport(lines, stdout, { maxBufferSize: 2 * options.maxLineBytes + 2 }),
  );
  stdin.once('end', close);
  stdin.once('close', close);
  options.signal.addEventListener('abort', close, { once: true });
  if (options.signal.aborted) close();
  await closed;
}

/** The JSON-RPC error for one line, or undefined when the line is a message to pass on. */
export function lineRefusal(line: Buffer): object | undefined {
  if (!isUtf8(line)) return refusal(-32700, 'Parse error: the line is not valid UTF-8', 'INVALID_REQUEST');
  let message: unknown;
  try {
    message = JSON.parse(line.toString('utf8'));
  } catch {
    return refusal(-32700, 'Parse error: the line is not valid JSON', 'INVALID_REQUEST');
  }
  if (Array.isArray(message))
    return refusal(
      -32600,
      'Invalid Request: JSON-RPC batches are not accepted (MCP 2025-06-18 removed them); send one message per line',
      'INVALID_REQUEST',
    );
  if (JSONRPCMessageSchema.safeParse(message).success) return undefined;
  const id = (message as { id?: unknown } | null)?.id;
  const answer = refusal(-32600, 'Invalid Request: not a JSON-RPC 2.0 message', 'INVALID_REQUEST');
  return typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id))
    ? { ...answer, id }
    : answer;
}

function refusal(code: number, message: string, appCode: string, hint?: string): object {
  return jsonRpcError(code, message, { code: appCode, message, ...(hint ? { hint } : {}) });
}

/** stdin split into checked lines: good ones pass on, each with its newline; bad ones are answered. */
class CheckedLines extends Transform {
  private held: Buffer[] = [];
  private heldBytes = 0;
  /** Bytes of the current line dropped because it is over the limit (0: within it). */
  private over = 0;

  private readonly maxLineBytes: number;
  private readonly answer: (error: object) => void;

  constructor(maxLineBytes: number, answer: (error: object) => void) {
    super();
    this.maxLineBytes = maxLineBytes;
    this.answer = answer;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    let rest = chunk;
    for (let nl = rest.indexOf(0x0a); nl !== -1; nl = rest.indexOf(0x0a)) {
      this.keep(rest.subarray(0, nl));
      this.endLine();
      rest = rest.subarray(nl + 1);
    }
    this.keep(rest);
    done();
  }

  override _flush(done: TransformCallback): void {
    if (this.heldBytes > 0 || this.over > 0) this.endLine();
    done();
  }

  private keep(part: Buffer): void {
    if (part.length === 0) return;
    if (this.over === 0 && this.heldBytes + part.length <= this.maxLineBytes) {
      this.held.push(part);
      this.heldBytes += part.length;
      return;
    }
    // Over the limit: nothing more of this line is kept.
    this.over += this.heldBytes + part.length;
    this.held = [];
    this.heldBytes = 0;
  }

  private endLine(): void {
    if (this.over > 0) {
      const bytes = this.over;
      this.over = 0;
      this.answer(
        refusal(
          -32600,
          `Invalid Request: a message of over ${bytes} bytes is over the limit of ${this.maxLineBytes} bytes`,
          'TOO_LARGE',
          'send less code, files or stdin (sandbox.maxRequestBytes)',
        ),
      );
      return;
    }
    const line = Buffer.concat(this.held).subarray(0, this.heldBytes);
    this.held = [];
    this.heldBytes = 0;
    const text = line.at(-1) === 0x0d ? line.subarray(0, -1) : line;
    if (text.length === 0) return;
    const error = lineRefusal(text);
    if (error) this.answer(error);
    else this.push(Buffer.concat([text, Buffer.from('\n')]));
  }
}
