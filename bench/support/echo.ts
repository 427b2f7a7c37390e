/**
 * A bare echo process: an HTTP server on 127.0.0.1 that returns the body it is sent, and a stdin to
 * stdout line echo. No MCP, no sandpit: its round trips after the benchmarks' pause are what this
 * machine charges for waking a second process at all, whatever that process then does.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

const SOURCE = `
const s = require('node:http').createServer((q, r) => {
  const body = [];
  q.on('data', (d) => body.push(d));
  q.on('end', () => { r.setHeader('content-type', 'application/json'); r.end(Buffer.concat(body)); });
});
s.listen(0, '127.0.0.1', () => process.stdout.write(JSON.stringify({ port: s.address().port }) + '\\n'));
process.stdin.on('data', (d) => process.stdout.write(d));
`;

export interface Echo {
  /** One POST of a small JSON body, answered with it. */
  http: () => Promise<void>;
  /** One line through stdin, read back from stdout. */
  stdio: () => Promise<void>;
  close: () => Promise<void>;
}

export async function startEcho(): Promise<Echo> {
  const child = spawn(process.execPath, ['-e', SOURCE], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async (): Promise<string> => {
    const line = await lines.next();
    if (line.done) throw new Error('the echo process exited');
    return line.value;
  };
  const { port } = JSON.parse(await next()) as { port: number };
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
  return {
    http: async () => {
      const res = await fetch(`http://127.0.0.1:${port}/`, {
        method: 'POST',
        body,
        headers: { 'content-type': 'application/json' },
      });
      if ((await res.text()) !== body) throw new Error('the HTTP echo answered something else');
    },
    stdio: async () => {
      child.stdin.write(`${body}\n`);
      if ((await next()) !== body) throw new Error('the stdio echo answered something else');
    },
    close: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill();
      await exited;
    },
  };
}
