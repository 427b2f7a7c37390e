/** `sandpit run`: one program in a fresh sandbox, output streamed, exit code passed through. */
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import type { RunRequestInput } from '../api/run.js';
import { LOCAL_PRINCIPAL } from '../gateway/principal.js';
import { BUILTIN_TEMPLATES, templateForFile } from '../policy/templates.js';
import { AppError } from '../shared/errors.js';
import { envInput, parse, printHelp, readStdin, resourcesOf, splitAtDashDash, toInt } from './args.js';
import { exitCodeOf, printEnding } from './output.js';
import { shutdownSignal } from './process.js';
import { loadContext, wireDocker, wireOci } from './wiring.js';

export const RUN_USAGE = `
usage: sandpit run [options] [FILE] [-- ARGV...]

Runs code in a fresh, locked-down container and exits with the program's exit code.

  sandpit run --template python -c 'print(1)'
  sandpit run app.py                       template from the extension (.py .js .sh .c .rs)
  echo hi | sandpit run -t bash -c 'cat'   stdin is passed through when it is not a terminal
  sandpit run -t bash -- ls -la /          an explicit argv instead of code

options:
  -c, --code CODE         code to run (default template: python)
  -t, --template NAME     python, python-data, node, bash, c or rust (or an alias such as py, js, sh)
      --image REF         image override; must be in the allowlist
  -f, --file PATH[=SRC]   put a local file into the workspace (repeatable); SRC defaults to PATH
  -e, --env NAME=VALUE    environment variable (repeatable)
      --timeout SECONDS   hard deadline (default and ceiling from config)
      --memory SIZE       memory limit, e.g. 256m
      --cpus N            CPU limit, e.g. 0.5
      --pids N            process limit
      --runtime NAME      container runtime, e.g. runsc (gVisor)
      --no-stdin          do not pass this process's stdin through
      --json              print the result as JSON instead of streaming the output
  -v, --verbose           log at the configured level (shows the audit record)
      --config PATH       config file (YAML or JSON); also SANDPIT_CONFIG
  -h, --help              this text

Every run leaves a record in the audit file (audit.file; see \`sandpit audit\`).

exit codes: the program's own; 124 timed out; 130 cancelled; 64 bad usage or request;
77 denied by policy; 69 engine, image or runtime missing; 74 the audit file cannot be written
(nothing ran); 70 other infrastructure errors.
`;

const OPTIONS = {
  code: { type: 'string', short: 'c' },
  template: { type: 'string', short: 't' },
  image: { type: 'string' },
  file: { type: 'string', short: 'f', multiple: true },
  env: { type: 'string', short: 'e', multiple: true },
  timeout: { type: 'string' },
  memory: { type: 'string' },
  cpus: { type: 'string' },
  pids: { type: 'string' },
  runtime: { type: 'string' },
  'no-stdin': { type: 'boolean' },
  json: { type: 'boolean' },
  verbose: { type: 'boolean', short: 'v' },
  config: { type: 'string' },
} as const;

export async function runCommand(argv: string[]): Promise<number> {
  const { own, command } = splitAtDashDash(argv);
  const { values, positionals } = parse(own, OPTIONS, RUN_USAGE);
  if (values.help) {
    printHelp(RUN_USAGE);
    return 0;
  }
  const request = buildRequest(
    values,
    positionals,
    command,
    values['no-stdin'] ? undefined : await readStdin(),
  );
  // A terminal command: only warnings and errors on stderr unless asked (--verbose shows the audit line).
  const ctx = loadContext({ configPath: values.config, ...(values.verbose ? {} : { logLevel: 'warn' }) });
  const { service } =
    ctx.config.sandbox.backend === 'oci'
      ? await wireOci(ctx, { reaping: false })
      : await wireDocker(ctx, { pools: false });
  const stop = shutdownSignal();
  try {
    const shown = { stdout: 0, stderr: 0 };
    const result = await service.runs.run(request, LOCAL_PRINCIPAL, {
      signal: stop.signal,
      onOutput: (chunk) => {
        if (values.json) return;
        (chunk.stream === 'stdout' ? process.stdout : process.stderr).write(chunk.data);
        shown[chunk.stream] += chunk.data.length;
      },
    });
    if (values.json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    else printEnding(result, shown);
    return exitCodeOf(result);
  } finally {
    stop.dispose();
    await service.shutdown();
  }
}

type Values = ReturnType<typeof parse<typeof OPTIONS>>['values'];

function buildRequest(
  values: Values,
  positionals: string[],
  command: string[] | undefined,
  stdin: string | undefined,
): RunRequestInput {
  const { template, code } = whatToRun(values, positionals);
  if (code === undefined && command === undefined) {
    throw new AppError('INVALID_REQUEST', 'nothing to run: give FILE, --code, or -- ARGV', {
      hint: 'see `sandpit run --help`',
    });
  }
  const resources = resourcesOf(values);
  return {
    ...(template !== undefined ? { template } : {}),
    ...(values.image !== undefined ? { image: values.image } : {}),
    ...(code !== undefined ? { code } : {}),
    ...(command !== undefined && command.length > 0 ? { command } : {}),
    files: (values.file ?? []).map(fileInput),
    env: (values.env ?? []).map((spec) => envInput(spec)),
    ...(stdin ? { stdin } : {}),
    ...(Object.keys(resources).length ? { resources } : {}),
    ...(values.timeout !== undefined ? { timeoutSeconds: toInt('--timeout', values.timeout) } : {}),
    ...(values.runtime !== undefined ? { runtime: values.runtime } : {}),
  };
}

/** The code and its template: from FILE (the template from its extension), or --code (python by default). */
function whatToRun(values: Values, positionals: string[]): { template?: string; code?: string } {
  if (positionals.length > 1)
    throw new AppError('INVALID_REQUEST', `expected at most one FILE, got ${positionals.join(' ')}`);
  const file = positionals[0];
  if (file === undefined) {
    const code = values.code;
    const template =
      values.template ?? (code !== undefined && values.image === undefined ? 'python' : undefined);
    return { ...(template !== undefined ? { template } : {}), ...(code !== undefined ? { code } : {}) };
  }
  if (values.code !== undefined)
    throw new AppError('INVALID_REQUEST', 'give either FILE or --code, not both');
  const template = values.template ?? templateForFile(BUILTIN_TEMPLATES, file)?.name;
  if (template === undefined) {
    throw new AppError('INVALID_REQUEST', `cannot tell the language of ${file} from its extension`, {
      hint: 'name it with --template (python, python-data, node, bash, c, rust)',
    });
  }
  return { template, code: readLocal(file) };
}

function readLocal(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (e) {
    throw new AppError('INVALID_REQUEST', `cannot read ${path}: ${(e as Error).message}`);
  }
}

function fileInput(spec: string): { path: string; content: string; encoding: 'base64' } {
  const eq = spec.indexOf('=');
  const dest = eq >= 0 ? spec.slice(0, eq) : basename(spec);
  const src = eq >= 0 ? spec.slice(eq + 1) : spec;
  let content: Buffer;
  try {
    content = readFileSync(src);
  } catch (e) {
    throw new AppError('INVALID_REQUEST', `cannot read ${src}: ${(e as Error).message}`);
  }
  return { path: dest, content: content.toString('base64'), encoding: 'base64' };
}
