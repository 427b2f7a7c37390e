/**
 * Package indexes on loopback, for egress tests: a wheel and an npm tarball built here, served by a
 * PyPI simple index and an npm registry stand-in (packument + tarball) on 127.0.0.1. Every request
 * they see is kept, so a test can tell what reached them and with which Host header.
 */
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { crc32 as zlibCrc32, gzipSync } from 'node:zlib';
import { pack } from 'tar-stream';

/** 1980-01-01, the earliest date a zip holds. */
const DOS_DATE = 0x21;

/** A zip archive of stored (uncompressed) entries: enough for a wheel. */
export function zip(files: Record<string, string>): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const [name, text] of Object.entries(files)) {
    const data = Buffer.from(text);
    const nameBytes = Buffer.from(name);
    const crc = zlibCrc32(data);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(DOS_DATE, 12);
    local.writeUInt32LE(crc >>> 0, 14);
    local.writeUInt32LE(data.length, 18);
    local.writeUInt32LE(data.length, 22);
    local.writeUInt16LE(nameBytes.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(DOS_DATE, 14);
    central.writeUInt32LE(crc >>> 0, 16);
    central.writeUInt32LE(data.length, 20);
    central.writeUInt32LE(data.length, 24);
    central.writeUInt16LE(nameBytes.length, 28);
    central.writeUInt32LE(offset, 42);
    locals.push(local, nameBytes, data);
    centrals.push(central, nameBytes);
    offset += local.length + nameBytes.length + data.length;
  }
  const directory = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(Object.keys(files).length, 8);
  end.writeUInt16LE(Object.keys(files).length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, directory, end]);
}

const recordHash = (text: string): string =>
  `sha256=${createHash('sha256').update(text).digest('base64url')}`;

export interface Wheel {
  name: string;
  version: string;
  file: string;
  bytes: Buffer;
}

/** A pure-Python wheel of one module, `<name>.py`, whose hello() returns `greeting`. */
export function buildWheel(name: string, version: string, greeting: string): Wheel {
  const info = `${name}-${version}.dist-info`;
  const files: Record<string, string> = {
    [`${name}.py`]: `def hello():\n    return ${JSON.stringify(greeting)}\n`,
    [`${info}/METADATA`]: `Metadata-Version: 2.1\nName: ${name}\nVersion: ${version}\nSummary: sandpit egress test\n`,
    [`${info}/WHEEL`]:
      'Wheel-Version: 1.0\nGenerator: sandpit-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n',
  };
  const record = Object.entries(files)
    .map(([path, text]) => `${path},${recordHash(text)},${Buffer.byteLength(text)}`)
    .concat(`${info}/RECORD,,`)
    .join('\n');
  files[`${info}/RECORD`] = `${record}\n`;
  return { name, version, file: `${name}-${version}-py3-none-any.whl`, bytes: zip(files) };
}

export interface NpmPackage {
  name: string;
  version: string;
  tarball: Buffer;
}

/** An npm package of one file, index.js, exporting hello() that returns `greeting`. */
export async function buildNpmPackage(name: string, version: string, greeting: string): Promise<NpmPackage> {
  const tar = pack();
  const chunks: Buffer[] = [];
  tar.on('data', (c: unknown) => chunks.push(c as Buffer));
  const files: Record<string, string> = {
    'package/package.json': JSON.stringify({ name, version, main: 'index.js' }),
    'package/index.js': `exports.hello = () => ${JSON.stringify(greeting)};\n`,
  };
  for (const [path, text] of Object.entries(files)) tar.entry({ name: path, mode: 0o644 }, text);
  tar.finalize();
  await once(tar, 'end');
  return { name, version, tarball: gzipSync(Buffer.concat(chunks)) };
}

export interface PackageServer {
  port: number;
  /** Requests seen, as `METHOD host url`. */
  seen: string[];
  close(): Promise<void>;
}

async function serve(
  route: (req: IncomingMessage) => { type: string; body: Buffer } | undefined,
): Promise<PackageServer> {
  const seen: string[] = [];
  const server: Server = createServer((req, res) => {
    seen.push(`${req.method} ${req.headers.host} ${req.url}`);
    const found = route(req);
    if (!found) return void res.writeHead(404).end('not found\n');
    res.writeHead(200, { 'content-type': found.type, 'content-length': found.body.length }).end(found.body);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

/** A PEP 503 simple index serving one wheel. */
export function simpleIndex(wheel: Wheel): Promise<PackageServer> {
  const sha = createHash('sha256').update(wheel.bytes).digest('hex');
  const html = (links: string) => Buffer.from(`<!DOCTYPE html><html><body>${links}</body></html>\n`);
  return serve((req) => {
    if (req.url === '/simple/')
      return { type: 'text/html', body: html(`<a href="/simple/${wheel.name}/">${wheel.name}</a>`) };
    if (req.url === `/simple/${wheel.name}/`)
      return {
        type: 'text/html',
        body: html(`<a href="/packages/${wheel.file}#sha256=${sha}">${wheel.file}</a>`),
      };
    if (req.url === `/packages/${wheel.file}`) return { type: 'application/octet-stream', body: wheel.bytes };
    return undefined;
  });
}

/** An npm registry stand-in serving one package: its packument and its tarball. */
export function npmRegistry(pkg: NpmPackage, host: string): Promise<PackageServer> {
  let port = 0;
  const file = `${pkg.name}-${pkg.version}.tgz`;
  const served = serve((req) => {
    if (req.url === `/${pkg.name}`) {
      const packument = {
        name: pkg.name,
        'dist-tags': { latest: pkg.version },
        versions: {
          [pkg.version]: {
            name: pkg.name,
            version: pkg.version,
            main: 'index.js',
            dist: {
              tarball: `http://${host}:${port}/${pkg.name}/-/${file}`,
              shasum: createHash('sha1').update(pkg.tarball).digest('hex'),
              integrity: `sha512-${createHash('sha512').update(pkg.tarball).digest('base64')}`,
            },
          },
        },
      };
      return { type: 'application/json', body: Buffer.from(JSON.stringify(packument)) };
    }
    if (req.url === `/${pkg.name}/-/${file}`) return { type: 'application/octet-stream', body: pkg.tarball };
    return undefined;
  });
  return served.then((s) => {
    port = s.port;
    return s;
  });
}
