/**
 * The files runs returned (issue 18), as every transport serves them: one file by its path (MCP
 * `resources/read`, REST `GET /runs/:id/files/*path`), all of a run's as a tar stream (REST
 * `GET /runs/:id/artifacts`), and the caller's recent runs' files (the MCP resource list). Only a
 * file the run's result lists is read, and only by the run's owner, for as long as the gateway keeps
 * the run's record.
 */
import { Readable } from 'node:stream';
import type { OutputFile } from '../api/outputs.js';
import type { RunResult } from '../api/run.js';
import type { FileEntry } from '../api/session.js';
import { artifactTar } from '../backends/artifacts.js';
import type { RunFiles } from '../backends/types.js';
import { AppError } from '../shared/errors.js';
import type { Principal } from './principal.js';
import type { RunUseCases } from './runs.js';

export interface RunFileRead {
  file: OutputFile;
  data: Buffer;
}

/** A file of one of the caller's runs. */
export interface ListedRunFile {
  runId: string;
  file: OutputFile;
}

/** Files listed at most (the newest runs' first). */
const MAX_LISTED = 256;

export class RunFileUseCases {
  private readonly runs: RunUseCases;
  private readonly files: RunFiles | undefined;

  constructor(runs: RunUseCases, files: RunFiles | undefined) {
    this.runs = runs;
    this.files = files;
  }

  /** A file the run returned, by its workspace path. */
  async read(runId: string, path: string, principal: Principal): Promise<RunFileRead> {
    const result = await this.runs.get(runId, principal);
    return { file: fileOf(result, path), data: await this.bytes(runId, path, principal) };
  }

  /** Every file the run returned, as a tar stream (its paths as they were in the workspace). */
  async artifacts(runId: string, principal: Principal): Promise<AsyncIterable<Buffer>> {
    const result = await this.runs.get(runId, principal);
    const files = result.outputs?.files ?? [];
    const mtime = result.finishedAt ?? new Date(0).toISOString();
    const entries: FileEntry[] = files.map((f) => ({
      path: f.path,
      type: 'file',
      size: f.bytes,
      mode: '0644',
      mtime,
    }));
    const byPath = new Map(entries.map((e) => [e.path, e]));
    return artifactTar(
      {
        list: () => Promise.resolve(entries),
        readFile: async ({ path }) => {
          const data = await this.bytes(runId, path, principal);
          const entry = { ...byPath.get(path)!, size: data.length };
          return { entry, data: Readable.from([data]) };
        },
      },
      { path: '', maxBytes: Number.MAX_SAFE_INTEGER },
    );
  }

  /** The files of the caller's runs this gateway keeps, the newest runs' first. */
  listed(principal: Principal): ListedRunFile[] {
    return this.runs
      .finished(principal)
      .flatMap((r) => (r.outputs?.files ?? []).map((file) => ({ runId: r.runId, file })))
      .slice(0, MAX_LISTED);
  }

  private bytes(runId: string, path: string, principal: Principal): Promise<Buffer> {
    if (!this.files) {
      throw new AppError('UNSUPPORTED', 'this backend keeps no output files', {
        hint: 'read the run result; its outputs say what was collected',
      });
    }
    return this.files.read(runId, path, { id: principal.id, namespace: principal.namespace });
  }
}

function fileOf(result: RunResult, path: string): OutputFile {
  const file = result.outputs?.files.find((f) => f.path === path);
  if (file) return file;
  throw new AppError('NOT_FOUND', `run ${result.runId} returned no file ${JSON.stringify(path)}`, {
    hint: 'the files a run returned are listed in its result (outputs.files)',
  });
}
