/**
 * The part of the OCI runtime specification (config.json, runtime-spec v1.0.2) that sandpit
 * writes: field names exactly as the specification spells them, nothing sandpit does not set.
 */

export interface OciSpec {
  ociVersion: string;
  process: OciProcess;
  root: { path: string; readonly: boolean };
  hostname: string;
  mounts: OciMount[];
  annotations: Record<string, string>;
  linux: OciLinux;
}

export interface OciProcess {
  terminal: boolean;
  user: { uid: number; gid: number; additionalGids: number[] };
  args: string[];
  env: string[];
  cwd: string;
  capabilities: Partial<Record<'bounding' | 'effective' | 'inheritable' | 'permitted' | 'ambient', string[]>>;
  rlimits: { type: string; hard: number; soft: number }[];
  noNewPrivileges: boolean;
  oomScoreAdj: number;
  apparmorProfile?: string;
}

export interface OciMount {
  destination: string;
  type: string;
  source: string;
  options: string[];
}

export interface OciDeviceRule {
  allow: boolean;
  type?: 'a' | 'c' | 'b';
  major?: number;
  minor?: number;
  access: string;
}

export interface OciResources {
  devices: OciDeviceRule[];
  memory: { limit: number; swap: number; disableOOMKiller: boolean };
  cpu: { quota: number; period: number };
  pids: { limit: number };
}

export interface OciSeccompArg {
  index: number;
  value: number;
  valueTwo?: number;
  op: string;
}

export interface OciSeccompRule {
  names: string[];
  action: string;
  args?: OciSeccompArg[];
  errnoRet?: number;
}

export interface OciSeccomp {
  defaultAction: string;
  defaultErrnoRet?: number;
  architectures: string[];
  syscalls: OciSeccompRule[];
}

export type OciNamespace = 'pid' | 'network' | 'ipc' | 'uts' | 'mount' | 'cgroup' | 'user';

export interface OciLinux {
  sysctl: Record<string, string>;
  resources: OciResources;
  cgroupsPath: string;
  namespaces: { type: OciNamespace }[];
  seccomp: OciSeccomp;
  maskedPaths: string[];
  readonlyPaths: string[];
}
