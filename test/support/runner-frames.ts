/** Runner frames as the runner writes them, for the protocol's tests. */

/** Before the job (the ready frame): u8 type, u32be length, payload. */
export function frame(type: string, data: Buffer | string = Buffer.alloc(0)): Buffer {
  const payload = typeof data === 'string' ? Buffer.from(data) : data;
  const hdr = Buffer.alloc(5);
  hdr.write(type, 0, 'latin1');
  hdr.writeUInt32BE(payload.length, 1);
  return Buffer.concat([hdr, payload]);
}

/** After the job: the job's key, u8 type, u16be length, payload. */
export function keyedFrame(key: Buffer, type: string, data: Buffer | string = Buffer.alloc(0)): Buffer {
  const payload = typeof data === 'string' ? Buffer.from(data) : data;
  const hdr = Buffer.alloc(3);
  hdr.write(type, 0, 'latin1');
  hdr.writeUInt16BE(payload.length, 1);
  return Buffer.concat([key, hdr, payload]);
}
