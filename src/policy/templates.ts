/**
 * The built-in templates: which image runs which language, and how. The runner inside every image
 * hands the code to the program as a sealed, read-only memfd behind `/sandpit/code/<file>`, so the
 * sandboxed program can read its own source but never change it.
 */
export const CODE_DIR = '/sandpit/code';
export const WORKSPACE = '/workspace';

export interface TemplateDefaults {
  timeoutSeconds?: number;
  memoryBytes?: number;
  pids?: number;
}

export interface Template {
  name: string;
  description: string;
  image: string;
  /** What the image offers beyond the runtime, as list_templates and images/README.md say. */
  libraries: readonly string[];
  /** Other names a caller may use for the language (`py`, `javascript`, …). */
  aliases: readonly string[];
  /** File extensions that select this template in `sandpit run app.py`. */
  extensions: readonly string[];
  fileName: string;
  /** argv that runs the code file at `${CODE_DIR}/${fileName}`. */
  command: readonly string[];
  env: Readonly<Record<string, string>>;
  defaults: TemplateDefaults;
  /** What a run collects when it names no `outputs` (workspace paths or globs). */
  outputs: readonly string[];
}

const code = (fileName: string): string => `${CODE_DIR}/${fileName}`;

/** Compile, then run: a shell line so the program's arguments pass through as "$@". */
const compileThenRun = (compile: string): string[] => [
  '/bin/sh',
  '-c',
  `${compile} && exec /tmp/main "$@"`,
  'main',
];

export const BUILTIN_TEMPLATES: readonly Template[] = [
  {
    name: 'python',
    description: 'Python 3.11 with the full standard library',
    libraries: [
      'the standard library',
      'pip and venv (an index needs an egress allowlist that names it)',
      '`python` and `python3`',
    ],
    image: 'sandpit/python:3.11',
    aliases: ['python3', 'py'],
    extensions: ['.py'],
    fileName: 'main.py',
    command: ['python3', code('main.py')],
    // A sandbox is thrown away after its run, so PEP 668's guard against mixing pip and apt protects
    // nothing: a plain `pip install x` falls back to a user install under HOME (/tmp, writable).
    env: { PYTHONUNBUFFERED: '1', PYTHONDONTWRITEBYTECODE: '1' },
    defaults: {},
    outputs: [],
  },
  {
    name: 'python-data',
    description: 'Python 3.11 for data work: plots saved as .png/.jpg/.svg come back as images',
    libraries: [
      'numpy 1.24',
      'pandas 1.5',
      'matplotlib 3.6 (no display needed: figures left open are saved at exit)',
      'scipy 1.10',
      'pillow 9.4',
      'the standard library',
    ],
    image: 'sandpit/python-data:3.11',
    aliases: ['data', 'pydata'],
    extensions: [],
    fileName: 'main.py',
    command: ['python3', code('main.py')],
    // One BLAS thread: a sandbox has a CPU or so, and every thread counts against its process limit.
    env: {
      PYTHONUNBUFFERED: '1',
      PYTHONDONTWRITEBYTECODE: '1',
      OPENBLAS_NUM_THREADS: '1',
      OMP_NUM_THREADS: '1',
    },
    defaults: {},
    outputs: ['*.png', '*.jpg', '*.svg'],
  },
  {
    name: 'node',
    description: 'Node.js 18 (JavaScript)',
    libraries: ['the Node.js core modules', 'npm (a registry needs an egress allowlist that names it)'],
    image: 'sandpit/node:18',
    aliases: ['javascript', 'js', 'nodejs'],
    extensions: ['.js', '.mjs', '.cjs'],
    fileName: 'main.js',
    command: ['node', '--preserve-symlinks-main', code('main.js')],
    env: {},
    defaults: {},
    outputs: [],
  },
  {
    name: 'bash',
    description: 'GNU bash 5 with coreutils',
    libraries: ['coreutils, grep, sed, tar, gzip (Debian base)'],
    image: 'sandpit/bash:5',
    aliases: ['sh', 'shell'],
    extensions: ['.sh', '.bash'],
    fileName: 'main.sh',
    command: ['bash', code('main.sh')],
    env: {},
    defaults: {},
    outputs: [],
  },
  {
    name: 'c',
    description: 'C with gcc 12: compiled, then run',
    libraries: ['glibc and libm (linked with -lm)'],
    image: 'sandpit/c:12',
    aliases: ['gcc'],
    extensions: ['.c'],
    fileName: 'main.c',
    command: compileThenRun(`gcc -O2 -std=gnu17 -I${WORKSPACE} -o /tmp/main ${code('main.c')} -lm`),
    env: {},
    defaults: { timeoutSeconds: 60 },
    outputs: [],
  },
  {
    name: 'rust',
    description: 'Rust with rustc and cargo (offline builds of crates without dependencies)',
    libraries: ['std', 'cargo, offline: crates without dependencies'],
    image: 'sandpit/rust:1',
    aliases: ['rs', 'rustc', 'cargo'],
    extensions: ['.rs'],
    fileName: 'main.rs',
    command: compileThenRun(`rustc --edition 2021 -C opt-level=1 -o /tmp/main ${code('main.rs')}`),
    env: { CARGO_HOME: '/tmp/cargo', CARGO_TARGET_DIR: '/tmp/target', CARGO_NET_OFFLINE: 'true' },
    defaults: { timeoutSeconds: 120, pids: 256 },
    outputs: [],
  },
];

/** Finds a template by name or alias, case-insensitively. */
export function findTemplate(templates: readonly Template[], nameOrAlias: string): Template | undefined {
  const key = nameOrAlias.toLowerCase();
  return templates.find((t) => t.name === key || t.aliases.includes(key));
}

/** Finds the template that runs files with this name's extension (`app.py` → python). */
export function templateForFile(templates: readonly Template[], fileName: string): Template | undefined {
  const dot = fileName.lastIndexOf('.');
  if (dot < 0) return undefined;
  const ext = fileName.slice(dot).toLowerCase();
  return templates.find((t) => t.extensions.includes(ext));
}
