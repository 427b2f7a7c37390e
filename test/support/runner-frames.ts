/** Runner frames as the runner writes them (u8 type, u32be length, payload), for the protocol's tests. */
export function frame(type: string, data: Buffer | string = Buffer.alloc(0)): Buffer {
  const payload = typeof data === 'string' ? Buffer.from(data) : data;
  const hdr = Buffer.alloc(5);
  hdr.write(type, 0, 'latin1');
  hdr.writeUInt32BE(payload.length, 1);
  return Buffer.concat([hdr, payload]);
}
