/**
 * The session WebSocket's wire contract (GET /sessions/:id/exec/ws), shared by the gateway and the
 * CLI: the subprotocol, and the channel byte that starts every binary message. The first message,
 * a resize's payload and the exit's are the schemas in session.ts.
 */
export const EXEC_WS_PROTOCOL = 'sandpit.exec.v1';

/** Client → server: stdin, resize, stdinEnd. Server → client: stdout, stderr, exit. */
export const Channel = { stdin: 0, stdout: 1, stderr: 2, exit: 3, resize: 4, stdinEnd: 255 } as const;

/** One binary message: the channel byte, then the payload. */
export function frame(channel: number, data: Buffer | string = Buffer.alloc(0)): Buffer {
  return Buffer.concat([Buffer.of(channel), typeof data === 'string' ? Buffer.from(data) : data]);
}
