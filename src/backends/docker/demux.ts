/**
 * Splits Docker's multiplexed attach stream (Tty off): 8-byte headers [stream, 0, 0, 0, size u32be].
 * Stream 1 is the runner's framed protocol, stream 2 its own diagnostics. Payloads are handed on
 * as views of the chunks they arrived in, as soon as they arrive: a frame split across chunks
 * comes out in pieces, and no payload byte is copied (the readers are byte-stream decoders).
 */
const HEADER = 8;

export class DockerDemuxer {
  private readonly header = Buffer.alloc(HEADER);
  private headerBytes = 0;
  /** Payload bytes of the current frame still to come, and where they go. */
  private left = 0;
  private toStderr = false;
  private readonly onStdout: (b: Buffer) => void;
  private readonly onStderr: (b: Buffer) => void;

  constructor(onStdout: (b: Buffer) => void, onStderr: (b: Buffer) => void) {
    this.onStdout = onStdout;
    this.onStderr = onStderr;
  }

  push(chunk: Buffer): void {
    let off = 0;
    while (off < chunk.length) {
      if (this.left > 0) {
        const n = Math.min(this.left, chunk.length - off);
        (this.toStderr ? this.onStderr : this.onStdout)(chunk.subarray(off, off + n));
        this.left -= n;
        off += n;
        continue;
      }
      const n = Math.min(HEADER - this.headerBytes, chunk.length - off);
      chunk.copy(this.header, this.headerBytes, off, off + n);
      this.headerBytes += n;
      off += n;
      if (this.headerBytes < HEADER) return;
      this.headerBytes = 0;
      this.toStderr = this.header[0] === 2;
      this.left = this.header.readUInt32BE(4);
      if (this.left === 0) (this.toStderr ? this.onStderr : this.onStdout)(chunk.subarray(off, off));
    }
  }
}
