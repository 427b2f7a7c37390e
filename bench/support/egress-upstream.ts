/**
 * The egress bench's upstream, a process of its own on 127.0.0.1: `DL <bytes>\n` is answered with
 * that many bytes and the end of the stream; `HI <bytes>\n` (a client hello's worth) with a 1460
 * byte reply (a server hello's), after which the client closes. Prints {"port": N} when listening.
 */
import { createServer } from 'node:net';

const CHUNK = Buffer.alloc(256 * 1024, 0x61);
const REPLY = Buffer.alloc(1460, 0x62);

const server = createServer((socket) => {
  socket.on('error', () => socket.destroy());
  let head = '';
  const onData = (chunk: Buffer): void => {
    head += chunk.toString('latin1');
    const nl = head.indexOf('\n');
    if (nl < 0) return;
    socket.off('data', onData);
    const [verb, size] = head.slice(0, nl).split(' ');
    if (verb === 'HI') return void socket.write(REPLY);
    let left = Number(size);
    const pump = (): void => {
      while (left > 0) {
        const piece = left >= CHUNK.length ? CHUNK : CHUNK.subarray(0, left);
        left -= piece.length;
        if (!socket.write(piece)) return void socket.once('drain', pump);
      }
      socket.end();
    };
    pump();
  };
  socket.on('data', onData);
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(
    `${JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 })}\n`,
  );
});
