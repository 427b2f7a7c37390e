/**
 * Root file systems for the OCI backend, from the sandbox images in the local engine (images/build.sh
 * imports its output there): each image id is unpacked once (`docker export` of a created, never
 * started container, into tar), kept under `<dir>/<id>/rootfs`, and then mounted read-only onto
 * itself, so that no run, runtime or bug of ours can write into a root that every run shares.
 *
 * A tag is resolved to its image id at most every `refreshMs`: a changed image is unpacked anew
 * and used from then on; between checks the known id is used without asking the engine, so the
 * engine is off the critical path, and a down engine does not stop runs of images already here.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type Docker from 'dockerode';
import type { Logger } from '../../observability/logger.js';
import { AppError } from '../../shared/errors.js';
import { engineError } from '../docker/engine-errors.js';
import { LABELS, MANAGED_BY } from '../docker/labels.js';
import { isMountPoint, mountReadOnly, unmount, writeBelowMount } from './host-mounts.js';
import { lacksMountPoints, makeMountPoints } from './mount-points.js';

export interface ImageRootfs {
  /** The reference asked for (sandpit/python:3.11). */
  image: string;
  /** The engine's image id (sha256:…). */
  id: string;
  /** The root file system: read-only, shared by every run of this image id. */
  path: string;
  /** The image's own environment. */
  env: string[];
}

interface Stored {
  id: string;
  refs: string[];
  env: string[];
}

export interface RootfsStoreOptions {
  docker: Docker;
  /** Where unpacked images live (one folder per image id). */
  dir: string;
  /** How often a tag is checked against the engine for a new image (ms). */
  refreshMs?: number;
  /** The owner label of the short-lived export containers (for Docker's reaper). */
  owner: string;
  logger?: Logger | undefined;
}

/** How long an export container may live before the Docker reaper may remove it. */
const EXPORT_EXPIRY_MS = 10 * 60_000;

export class RootfsStore {
  private readonly docker: Docker;
  private readonly dir: string;
  private readonly refreshMs: number;
  private readonly owner: string;
  private readonly logger: Logger | undefined;
  /** ref → the id it had when last checked, and when. */
  private readonly resolved = new Map<string, { id: string; env: string[]; at: number }>();
  /** id → its unpacking (single flight) or its ready path. */
  private readonly unpacked = new Map<string, Promise<string>>();
  private readonly refreshing = new Set<string>();

  constructor(options: RootfsStoreOptions) {
    this.docker = options.docker;
    this.dir = options.dir;
    this.refreshMs = options.refreshMs ?? 2000;
    this.owner = options.owner;
    this.logger = options.logger;
  }

  /** The root file system of `image` as the engine has it now (or as last seen, within `refreshMs`). */
  async get(image: string): Promise<ImageRootfs> {
    let known = this.resolved.get(image);
    if (!known) {
      known = await this.resolve(image);
    } else if (Date.now() - known.at > this.refreshMs) {
      this.refreshInBackground(image);
    }
    const path = await this.ensure(known.id, image, known.env);
    return { image, id: known.id, path, env: known.env };
  }

  /** Whether the engine has `image`, or (without an engine) it was unpacked here before. Unpacks nothing. */
  async present(image: string): Promise<boolean> {
    if (this.resolved.has(image)) return true;
    return this.resolve(image).then(
      () => true,
      () => false,
    );
  }

  /** The image ids this store knows the current root of, per reference. */
  current(): Map<string, string> {
    return new Map([...this.resolved].map(([ref, r]) => [ref, r.id]));
  }

  private refreshInBackground(image: string): void {
    if (this.refreshing.has(image)) return;
    this.refreshing.add(image);
    this.resolve(image)
      .then((r) => this.ensure(r.id, image, r.env))
      .catch((e: unknown) => this.logger?.debug({ image, err: String(e) }, 'Kept the known root file system'))
      .finally(() => this.refreshing.delete(image));
  }

  /** Asks the engine for the image's id; without an engine, the last one unpacked for this reference. */
  private async resolve(image: string): Promise<{ id: string; env: string[]; at: number }> {
    let info: Docker.ImageInspectInfo;
    try {
      info = await this.docker.getImage(image).inspect();
    } catch (e) {
      const status = (e as { statusCode?: number }).statusCode;
      const stored = status === 404 ? undefined : await this.storedFor(image);
      if (stored) return this.remember(image, stored.id, stored.env);
      throw engineError(e, { image });
    }
    return this.remember(image, info.Id, info.Config.Env ?? []);
  }

  private remember(image: string, id: string, env: string[]) {
    const entry = { id, env, at: Date.now() };
    this.resolved.set(image, entry);
    return entry;
  }

  /** The stored image that was unpacked for `image` (for when the engine does not answer). */
  private async storedFor(image: string): Promise<Stored | undefined> {
    for (const name of await readdir(this.dir).catch(() => [])) {
      const stored = await readStored(join(this.dir, name));
      if (stored?.refs.includes(image)) return stored;
    }
    return undefined;
  }

  private ensure(id: string, image: string, env: string[]): Promise<string> {
    let ready = this.unpacked.get(id);
    if (!ready) {
      ready = this.prepare(id, image, env);
      this.unpacked.set(id, ready);
      ready.catch(() => this.unpacked.delete(id));
    }
    return ready;
  }

  /** The folder of `id`, unpacked (by this or another process) and mounted read-only. */
  private async prepare(id: string, image: string, env: string[]): Promise<string> {
    const home = join(this.dir, folderOf(id));
    const rootfs = join(home, 'rootfs');
    if (!existsSync(join(home, 'image.json'))) await this.unpack(id, image, env, home);
    await addMountPoints(rootfs);
    if (!(await isMountPoint(rootfs))) await mountReadOnly(rootfs);
    return rootfs;
  }

  private async unpack(id: string, image: string, env: string[], home: string): Promise<void> {
    const started = performance.now();
    const temp = join(this.dir, `.unpack-${folderOf(id)}-${randomBytes(4).toString('hex')}`);
    const rootfs = join(temp, 'rootfs');
    await mkdir(rootfs, { recursive: true, mode: 0o755 });
    try {
      await this.export(id, rootfs);
      await rm(join(rootfs, '.dockerenv'), { force: true });
      await makeMountPoints(rootfs);
      const stored: Stored = { id, refs: [image], env };
      await writeFile(join(temp, 'image.json'), `${JSON.stringify(stored)}\n`);
      await rename(temp, home).catch(async (e: unknown) => {
        // Another process unpacked the same image first: use its copy.
        if (!existsSync(join(home, 'image.json'))) throw e;
        await rm(temp, { recursive: true, force: true });
      });
    } catch (e) {
      await rm(temp, { recursive: true, force: true });
      throw e;
    }
    this.logger?.info(
      { image, id, ms: Math.round(performance.now() - started) },
      'Unpacked an image for the oci backend',
    );
  }

  /** `docker export` of a created (never started) container of the image, untarred into `into`. */
  private async export(id: string, into: string): Promise<void> {
    let container: Docker.Container;
    try {
      container = await this.docker.createContainer({
        Image: id,
        Entrypoint: ['/nonexistent'],
        Labels: {
          [LABELS.managedBy]: MANAGED_BY,
          [LABELS.kind]: 'oci-export',
          [LABELS.owner]: this.owner,
          [LABELS.expires]: String(Date.now() + EXPORT_EXPIRY_MS),
        },
        HostConfig: { NetworkMode: 'none' },
      });
    } catch (e) {
      throw engineError(e, { image: id });
    }
    try {
      const tar = spawn('tar', ['-x', '-f', '-', '-C', into, '--numeric-owner', '-p'], {
        stdio: ['pipe', 'ignore', 'pipe'],
      });
      let stderr = '';
      tar.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
      const exited = new Promise<number | null>((r) => tar.on('close', r));
      await pipeline(await container.export(), tar.stdin);
      const code = await exited;
      if (code !== 0) throw new AppError('BACKEND_ERROR', `unpacking image ${id} failed: ${stderr.trim()}`);
    } finally {
      await container.remove({ force: true }).catch(() => {});
    }
  }

  /**
   * Removes the unpacked images no reference here points at any more and that `inUse` does not
   * name (the roots of runs that still exist, in any process). Returns the ids removed.
   */
  async prune(inUse: ReadonlySet<string>): Promise<string[]> {
    const current = new Set([...this.resolved.values()].map((r) => folderOf(r.id)));
    const removed: string[] = [];
    for (const name of await readdir(this.dir).catch(() => [])) {
      const home = join(this.dir, name);
      if (name.startsWith('.unpack-') || current.has(name) || inUse.has(join(home, 'rootfs'))) continue;
      const stored = await readStored(home);
      if (!stored || !(await this.superseded(stored))) continue;
      await unmount(join(home, 'rootfs'));
      await rm(home, { recursive: true, force: true });
      this.unpacked.delete(stored.id);
      removed.push(stored.id);
    }
    return removed;
  }

  /** True when none of the image's references points at it in the engine any more. */
  private async superseded(stored: Stored): Promise<boolean> {
    for (const ref of stored.refs) {
      const id = await this.docker
        .getImage(ref)
        .inspect()
        .then(
          (i) => i.Id,
          (e: unknown) => ((e as { statusCode?: number }).statusCode === 404 ? undefined : stored.id),
        );
      if (id === stored.id) return false;
    }
    return true;
  }
}

/**
 * Adds the mount points an unpacked root lacks (it was unpacked before they were added here),
 * below its read-only mount when it has one.
 */
async function addMountPoints(rootfs: string): Promise<void> {
  if (!(await lacksMountPoints(rootfs))) return;
  if (await isMountPoint(rootfs)) await writeBelowMount(rootfs, makeMountPoints);
  else await makeMountPoints(rootfs);
}

/** sha256:abc… → sha256-abc… (a folder name). */
function folderOf(id: string): string {
  return id.replace(/[^A-Za-z0-9._-]/g, '-');
}

async function readStored(home: string): Promise<Stored | undefined> {
  try {
    const parsed = JSON.parse(await readFile(join(home, 'image.json'), 'utf8')) as Partial<Stored>;
    if (typeof parsed.id !== 'string' || !Array.isArray(parsed.refs)) return undefined;
    return { id: parsed.id, refs: parsed.refs, env: parsed.env ?? [] };
  } catch {
    return undefined;
  }
}
