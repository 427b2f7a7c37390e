/**
 * Splits Docker's multiplexed attach stream (Tty off): 8-byte headers [stream, 0, 0, 0, size u32be].
 * Stream 1 is the runner's framed protocol, stream 2 its own diagnostics.
 */
export class DockerDemuxer {
  private pending: Buffer = Buffer.alloc(0);
  private readonly onStdout: (b: Buffer) => void;
  private readonly onStderr: (b: Buffer) => void;

  constructor(onStdout: (b: Buffer) => void, onStderr: (b: Buffer) => void) {
    this.onStdout = onStdout;
    this.onStderr = onStderr;
  }

  push(chunk: Buffer): void {
    let buf = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    while (buf.length >= 8) {
      const size = buf.readUInt32BE(4);
      if (buf.length < 8 + size) break;
      const payload = buf.subarray(8, 8 + size);
      if (buf[0] === 2) this.onStderr(payload);
      else this.onStdout(payload);
      buf = buf.subarray(8 + size);
    }
    this.pending = buf;
  }
}
