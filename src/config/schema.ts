/**
 * The one configuration schema. Values may come from a YAML/JSON file or from environment variables,
 * so every leaf accepts its text form too (`"512m"`, `"true"`, `"a,b"`), and every error says
 * which form is accepted.
 */
import { createHash } from 'node:crypto';
import * as z from 'zod';
import {
  EgressEntryInputSchema,
  MAX_EGRESS_ENTRIES,
  parseEntry,
  type EgressEntry,
  type EgressEntryInput,
} from '../api/egress.js';
import { RESERVED_PRINCIPAL_NAMES } from '../api/principals.js';
import { refusalOf } from '../policy/egress-rules.js';
import { parseCidr } from '../shared/ip.js';
import { CPU_FORM, parseCpu, parseSize, SIZE_FORM } from '../shared/quantity.js';

const int = (min: number, max: number) =>
  z.preprocess(
    (v) => (typeof v === 'string' && /^\s*-?\d+\s*$/.test(v) ? Number(v) : v),
    z
      .number({ error: `expected a whole number from ${min} to ${max}` })
      .int({ error: `expected a whole number from ${min} to ${max}` })
      .min(min, { error: `expected a whole number from ${min} to ${max}` })
      .max(max, { error: `expected a whole number from ${min} to ${max}` }),
  );

const TRUE = ['true', '1', 'yes', 'on'];
const FALSE = ['false', '0', 'no', 'off'];
const bool = () =>
  z.preprocess(
    (v) => {
      if (typeof v !== 'string') return v;
      const s = v.trim().toLowerCase();
      return TRUE.includes(s) ? true : FALSE.includes(s) ? false : v;
    },
    z.boolean({ error: 'expected true or false' }),
  );

const list = () =>
  z.preprocess(
    (v) =>
      typeof v === 'string'
        ? v
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean)
        : v,
    z.array(z.string().min(1), { error: 'expected a list (YAML list, or comma-separated text)' }),
  );

const absolutePath = () => z.string().regex(/^\/./, { error: 'expected an absolute path' });

const quantity = (form: string, parse: (v: string | number) => number | undefined) =>
  z.union([z.string(), z.number()], { error: `expected ${form}` }).transform((v, ctx) => {
    const n = parse(v);
    if (n === undefined || n <= 0) {
      ctx.addIssue({ code: 'custom', message: `expected ${form}` });
      return z.NEVER;
    }
    return n;
  });
/** Which quantity a field holds, so that `sandpit config` can print it the way it is written. */
export type QuantityKind = 'size' | 'cpu';
const size = () => quantity(SIZE_FORM, parseSize).meta({ quantity: 'size' satisfies QuantityKind });
const cpu = () => quantity(CPU_FORM, parseCpu).meta({ quantity: 'cpu' satisfies QuantityKind });

const json = <T extends z.ZodType>(schema: T) =>
  z.preprocess((v) => {
    if (typeof v !== 'string') return v;
    try {
      return JSON.parse(v) as unknown;
    } catch {
      return v;
    }
  }, schema);

/** Egress entries: a YAML list (text or objects), JSON, or comma-separated text. */
const egressList = () =>
  z.preprocess(
    (v) => {
      if (typeof v !== 'string') return v;
      if (v.trim().startsWith('[')) {
        try {
          return JSON.parse(v) as unknown;
        } catch {
          return v;
        }
      }
      return v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
    },
    z
      .array(EgressEntryInputSchema, {
        error: 'expected a list of host[:port] / cidr[:port] (YAML list, JSON, or comma-separated text)',
      })
      .max(MAX_EGRESS_ENTRIES),
  );

const cidrList = () =>
  list().pipe(
    z.array(
      z.string().superRefine((c, ctx) => {
        const parsed = parseCidr(c);
        if (!parsed.ok) ctx.addIssue({ code: 'custom', message: parsed.message });
      }),
    ),
  );

/** A namespace name: a DNS-1123 label. */
const NAMESPACE = z.string().regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, {
  error:
    'expected a namespace name (a DNS-1123 label: lowercase letters, digits and -, at most 63) like sandpit-runs',
});

export const TokenSchema = z
  .object({
    name: z
      .string()
      .min(1)
      .regex(/^[^#]*$/, { error: 'expected a name without # (OAuth principals are issuer#subject)' })
      .describe('Who holds the token; appears in audit logs'),
    token: z.string().min(8, { error: 'expected at least 8 characters' }).optional(),
    tokenSha256: z
      .string()
      .regex(/^[a-f0-9]{64}$/, { error: 'expected 64 lowercase hex digits (sha256 of the token)' })
      .optional(),
    templates: list()
      .optional()
      .describe("Templates this token's runs must name, and whose images they run in (any when absent)"),
    images: list()
      .optional()
      .describe(
        'Images this token may use, within the allowlist: with templates, more images for them; alone, the only ones',
      ),
    maxConcurrentRuns: int(1, 10_000).optional(),
    runsPerMinute: int(1, 1_000_000)
      .optional()
      .describe('Runs this token may start a minute (sandbox.runsPerMinute when absent)'),
    outputBytesPerMinute: size()
      .optional()
      .describe("Output this token's runs may write a minute (sandbox.outputBytesPerMinute when absent)"),
    maxSessions: int(1, 100_000)
      .optional()
      .describe('Live sessions this token may hold (sessions.maxPerPrincipal when absent)'),
    namespace: NAMESPACE.optional().describe(
      "Kubernetes: the namespace this token's runs and sessions are made in, and the only one it sees (kubernetes.gateway.namespace when absent). Docker: no effect",
    ),
    egress: egressList()
      .optional()
      .describe(
        "The most this token's sandboxes may reach, each entry within sandbox.egress.allow (all of it when absent)",
      ),
  })
  .strict()
  .refine((t) => (t.token === undefined) !== (t.tokenSha256 === undefined), {
    error: 'give exactly one of token or tokenSha256',
  });
export type TokenConfig = z.infer<typeof TokenSchema>;

const sha256Hex = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

/**
 * Names tell tokens apart in logs and audit records, so two tokens may not share one, nor take a
 * name sandpit gives its own principals; and one token may not be listed twice (which scope would
 * it have?). Ownership is by the token's digest either way.
 */
function checkTokens(
  auth: { token?: string | undefined; tokens: TokenConfig[] },
  ctx: z.RefinementCtx,
): void {
  const names = new Map<string, number>();
  const digests = new Map<string, string>();
  if (auth.token !== undefined) digests.set(sha256Hex(auth.token), 'auth.token');
  auth.tokens.forEach((t, i) => {
    if (RESERVED_PRINCIPAL_NAMES.includes(t.name)) {
      ctx.addIssue({
        code: 'custom',
        path: ['tokens', i, 'name'],
        message: `"${t.name}" is reserved (${RESERVED_PRINCIPAL_NAMES.join(', ')}): give the token another name`,
      });
    }
    const first = names.get(t.name);
    if (first === undefined) names.set(t.name, i);
    else {
      ctx.addIssue({
        code: 'custom',
        path: ['tokens', i, 'name'],
        message: `"${t.name}" is already the name of auth.tokens.${first}: each token needs its own name`,
      });
    }
    const digest = t.tokenSha256 ?? sha256Hex(t.token ?? '');
    const other = digests.get(digest);
    if (other === undefined) digests.set(digest, `auth.tokens.${i}`);
    else {
      ctx.addIssue({
        code: 'custom',
        path: ['tokens', i, t.tokenSha256 !== undefined ? 'tokenSha256' : 'token'],
        message: `the same token as ${other}: list each token once`,
      });
    }
  });
}

/** A token narrows the ceiling, never widens it: each of its entries must lie within sandbox.egress.allow. */
function checkTokenEgress(
  config: {
    auth: { tokens: TokenConfig[] };
    sandbox: { egress: { allow: z.input<typeof EgressEntryInputSchema>[] } };
  },
  ctx: z.RefinementCtx,
): void {
  // Malformed entries are reported where they are; only valid ones are compared.
  const valid = (input: EgressEntryInput): EgressEntry | undefined => {
    const parsed = parseEntry(input);
    return parsed.ok ? parsed.entry : undefined;
  };
  const list = <T>(v: T[] | undefined): T[] => (Array.isArray(v) ? v : []);
  const ceiling = list(config.sandbox.egress.allow)
    .map(valid)
    .filter((e) => e !== undefined);
  list(config.auth.tokens).forEach((t, i) => {
    list(t.egress).forEach((input, j) => {
      const entry = valid(input);
      const why = entry && refusalOf(ceiling, entry);
      if (!why) return;
      ctx.addIssue({
        code: 'custom',
        path: ['auth', 'tokens', i, 'egress', j],
        message: `not within sandbox.egress.allow (a token narrows the ceiling, never widens it): ${why}`,
      });
    });
  });
}

const URL_TEXT = z.url({ protocol: /^https?$/, error: 'expected an http(s) URL' });

/** The gateway as an OAuth 2.1 resource server (gateway/oauth.ts). */
export const OAuthSchema = z
  .object({
    issuer: URL_TEXT.describe("The authorization server's issuer: every token's iss"),
    audience: URL_TEXT.describe(
      "The gateway's canonical MCP URL, e.g. https://sandpit.example.com/mcp (RFC 8707): every token's aud must hold it",
    ),
    jwksUrl: URL_TEXT.optional().describe("The issuer's JWKS (its jwks_uri)"),
    jwksFile: z.string().min(1).optional().describe("The issuer's JWKS, as a file"),
    requiredScopes: list()
      .default(['sandpit'])
      .describe('Scopes every access token must carry (else 403 insufficient_scope)'),
    clockToleranceSeconds: int(0, 300).default(30),
    namespaces: list()
      .default([])
      .describe("Kubernetes: the namespaces a token's namespace claim may name (none when empty)"),
    claims: z
      .object({
        templates: z.string().min(1).default('sandpit_templates'),
        images: z.string().min(1).default('sandpit_images'),
        maxConcurrentRuns: z.string().min(1).default('sandpit_max_concurrent_runs'),
        maxSessions: z.string().min(1).default('sandpit_max_sessions'),
        namespace: z.string().min(1).default('sandpit_namespace'),
      })
      .strict()
      .prefault({})
      .describe("Which claim holds each field of a token's scope"),
    defaults: z
      .object({
        templates: list().optional(),
        images: list().optional(),
        maxConcurrentRuns: int(1, 10_000).optional(),
        maxSessions: int(1, 100_000).optional(),
        runsPerMinute: int(1, 1_000_000).optional(),
        outputBytesPerMinute: size().optional(),
      })
      .strict()
      .prefault({})
      .describe('What a token carries when it has no claim for it'),
  })
  .strict()
  .refine((o) => (o.jwksUrl === undefined) !== (o.jwksFile === undefined), {
    error: 'give exactly one of jwksUrl or jwksFile',
  });
export type OAuthConfig = z.infer<typeof OAuthSchema>;

const RUNTIME = z
  .string()
  .regex(/^[a-z0-9][a-z0-9.-]{0,62}$/, { error: 'expected a runtime name like runsc' });
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export const ConfigSchema = z
  .object({
    server: z
      .object({
        port: int(0, 65535).default(8080),
        host: z.string().min(1).default('127.0.0.1'),
        allowedHosts: list().optional(),
        stateless: bool().default(false),
        seedTools: bool()
          .default(true)
          .describe("Offer the seed servers' tools, execute_python_code and check_sandbox_health"),
        maxSessions: int(1, 100_000).default(256).describe('MCP sessions open at once (stateful HTTP)'),
        maxSessionsPerPrincipal: int(1, 100_000)
          .default(64)
          .describe(
            "One token's sessions (without tokens: one client address's); more close its least recently used idle one",
          ),
        sessionIdleSeconds: int(1, 86_400)
          .default(1800)
          .describe('A session with no request this long is closed'),
        unusedSessionSeconds: int(1, 86_400)
          .default(60)
          .describe('A session that made no call since initialize is closed after this long'),
        headersTimeoutSeconds: int(1, 300)
          .default(10)
          .describe("How long a client has to send a request's headers (slowloris); then 408 and closed"),
        requestTimeoutSeconds: int(1, 86_400)
          .default(30)
          .describe('How long a client has to send a whole request, its body included; then 408 and closed'),
        maxRequestsPerSecond: int(1, 100_000)
          .default(100)
          .describe('Requests one token (without tokens: one client address) may make each second'),
        runHistoryBytes: size()
          .default(32 * 1024 ** 2)
          .describe(
            "Memory for finished runs' results, so get_run answers after a run ends; a delivered result keeps 4 KiB per stream",
          ),
        instanceId: z
          .string()
          .min(1)
          .max(1024)
          .optional()
          .describe(
            'Which gateway this is, for its sessions: one started again with the same id adopts them (default: its state directory)',
          ),
      })
      .strict()
      // Node refuses a headers timeout longer than the request's.
      .refine((s) => s.headersTimeoutSeconds <= s.requestTimeoutSeconds, {
        path: ['headersTimeoutSeconds'],
        error: 'must not be over server.requestTimeoutSeconds',
      })
      .prefault({}),
    auth: z
      .object({
        token: z.string().min(8, { error: 'expected at least 8 characters' }).optional(),
        tokens: json(z.array(TokenSchema)).default([]),
        oauth: json(OAuthSchema).optional(),
      })
      .strict()
      .superRefine(checkTokens)
      .prefault({}),
    sandbox: z
      .object({
        backend: z
          .enum(['docker', 'kubernetes', 'oci'], { error: 'expected docker, kubernetes or oci' })
          .default('docker'),
        imageAllowlist: list().optional(),
        maxCpu: cpu().default(1000),
        maxMemory: size().default(512 * 1024 ** 2),
        maxPids: int(8, 65_536).default(128),
        maxWorkspace: size().default(64 * 1024 ** 2),
        tmpSize: size().default(64 * 1024 ** 2),
        timeoutSeconds: int(1, 86_400).default(30),
        maxOutputBytes: size().default(1024 ** 2),
        maxRequestBytes: size().default(4 * 1024 ** 2),
        maxDownloadBytes: size()
          .default(64 * 1024 ** 2)
          .describe(
            'Largest file a session download returns (a sparse file may be far larger than the disk)',
          ),
        disableNetwork: bool()
          .default(true)
          .describe(
            'DISABLE_NETWORK: true, every sandbox has no network and an allowlist is refused; false, a sandbox that asks for an allowlist gets it within egress.allow (one that names no network still has none)',
          ),
        egress: z
          .object({
            allow: egressList()
              .default([])
              .describe(
                'The ceiling of every allowlist: host[:port] (a host alone: 443 and 80; *. for every name below a domain) or cidr[:port] (alone: every port)',
              ),
            internalCidrs: cidrList()
              .default([])
              .describe(
                "More ranges the proxy never dials (with loopback, private, link-local, metadata and the host's own addresses), e.g. the cluster's pod and service CIDRs",
              ),
            maxConnections: int(1, 10_000)
              .default(32)
              .describe('Connections one run or session may have open at once through the proxy'),
            maxBytes: size()
              .default(1024 ** 3)
              .describe('Bytes one run or session may move through the proxy, both ways together'),
            connectTimeoutSeconds: int(1, 600).default(10).describe('Longest the proxy waits to connect'),
            idleTimeoutSeconds: int(1, 86_400)
              .default(60)
              .describe('A proxied connection with no bytes either way this long is closed'),
            socketDir: z
              .string()
              .min(1)
              .max(80)
              .optional()
              .describe(
                "Docker: where the proxy's per-sandbox sockets are made, a path the engine sees the same way (default: $XDG_RUNTIME_DIR/sandpit/egress, else the state directory's egress/)",
              ),
          })
          .strict()
          .prefault({}),
        runtime: RUNTIME.optional(),
        allowedRuntimes: list().optional(),
        maxConcurrentRuns: int(1, 10_000).default(8),
        maxQueuedRuns: int(0, 100_000).default(32),
        runsPerMinute: int(1, 1_000_000)
          .optional()
          .describe(
            'Runs one token (without tokens: the local caller) may start a minute, counted in this gateway process; off when absent',
          ),
        outputBytesPerMinute: size()
          .optional()
          .describe(
            "Output (stdout + stderr) one token's runs may write a minute, counted in this gateway process; over it, its next run waits; off when absent",
          ),
      })
      .strict()
      .prefault({}),
    sessions: z
      .object({
        max: int(1, 100_000).default(16).describe('Sessions alive at once on this server'),
        maxPerPrincipal: int(1, 100_000)
          .default(16)
          .describe(
            "One token's live sessions (without tokens: the local caller's); a token's maxSessions narrows it",
          ),
        ttlSeconds: int(1, 31_536_000)
          .default(3600)
          .describe('Whole lifetime of a session that asks for none'),
        maxTtlSeconds: int(1, 31_536_000)
          .default(86_400)
          .describe('The longest lifetime a session may ask for'),
        idleTimeoutSeconds: int(1, 31_536_000)
          .default(600)
          .describe('A session without an exec or file operation this long ends'),
        maxIdleTimeoutSeconds: int(1, 31_536_000).default(86_400),
        maxExecs: int(1, 1024).default(16).describe('Execs that run at once in one session'),
        logExecs: int(1, 100_000)
          .default(100)
          .describe('Execs a session keeps in its log (GET /sessions/:id/logs)'),
        logBytes: size()
          .default(1024 ** 2)
          .describe("Bytes of output a session's log keeps, oldest execs dropped first"),
      })
      .strict()
      .prefault({}),
    docker: z
      .object({
        socketPath: z.string().min(1).default('/var/run/docker.sock'),
        runFilesBytes: size()
          .default(1024 ** 3)
          .describe(
            "Disk for runs' output files (outputs) under the state directory, per gateway process (Docker and oci backends); past it the oldest runs' files go first",
          ),
      })
      .strict()
      .prefault({}),
    oci: z
      .object({
        runDir: absolutePath()
          .default('/run/sandpit/oci')
          .describe("The oci backend's bundles, runtime state and shared /etc files (sandpit's alone)"),
        rootfsDir: absolutePath()
          .optional()
          .describe('Unpacked sandbox images (default: ${XDG_CACHE_HOME:-~/.cache}/sandpit/oci/rootfs)'),
        runcPath: absolutePath().default('/usr/sbin/runc'),
        runscPath: absolutePath().default('/usr/bin/runsc'),
        imageRefreshSeconds: int(1, 3600)
          .default(2)
          .describe('How often an image tag is checked against the engine for a new image'),
      })
      .strict()
      .prefault({}),
    pool: z
      .object({
        enabled: bool().default(true),
        minIdle: int(0, 1000).default(2),
        maxSize: int(1, 1000).default(8),
        maxTotal: int(1, 10_000).default(32),
        maxIdleSeconds: int(1, 86_400).default(300),
        maxStarting: int(1, 64).default(4),
        checkIntervalSeconds: int(1, 3600).default(10),
        prewarm: list().default([]),
        prewarmSessions: list().default([]).describe('Templates whose session pools fill at start-up'),
      })
      .strict()
      .prefault({}),
    kubernetes: z
      .object({
        // What both the operator and the gateway read: the cluster's RuntimeClasses and the pending limit.
        runtimeClassName: RUNTIME.optional().describe('RuntimeClass for runs that name none'),
        allowedRuntimeClasses: list()
          .optional()
          .describe('RuntimeClasses a run may name (the default only when absent)'),
        pendingTimeoutSeconds: int(1, 86_400)
          .default(120)
          .describe(
            "A run whose pod has not started this long after it was made fails, with the pod's reason",
          ),
        operator: z
          .object({
            namespaces: list().default([]).describe('Namespaces the operator watches (all when empty)'),
            imagePullPolicy: z
              .enum(['IfNotPresent', 'Never', 'Always'], { error: 'expected IfNotPresent, Never or Always' })
              .default('IfNotPresent'),
            ttlSecondsAfterFinished: int(0, 31_536_000)
              .optional()
              .describe('TTL for finished runs that set none'),
            cpuRequest: cpu().default(10),
            memoryRequest: size().default(32 * 1024 ** 2),
            startGraceSeconds: int(0, 3600)
              .default(120)
              .describe(
                "Added to a sandbox pod's activeDeadlineSeconds, the kubelet's backstop: the kubelet counts it from when it takes the pod, image pull and container start included (the program's own deadline is the runner's)",
              ),
            outputTailBytes: size().default(4096),
            outputReadBytes: size().default(1024 ** 2),
            workers: int(1, 64).default(4),
            watchTimeoutSeconds: int(5, 3600).default(300),
            resyncSeconds: int(10, 86_400).default(600),
            leaderElection: bool().default(true),
            leaseName: z.string().min(1).max(253).default('sandpit-operator'),
            leaseNamespace: z
              .string()
              .min(1)
              .max(63)
              .optional()
              .describe("Default: the operator's own namespace"),
            leaseDurationSeconds: int(2, 3600).default(15),
            renewDeadlineSeconds: int(1, 3600).default(10),
            retryPeriodSeconds: int(1, 600).default(2),
            probeHost: z.string().min(1).default('127.0.0.1'),
            probePort: int(0, 65535).default(8081),
            networkPolicyEnforced: bool()
              .optional()
              .describe(
                "The cluster's network plugin enforces NetworkPolicy. Unset or false: a run or session with egress none starts only in a sandbox whose only interface is lo (e.g. RuntimeClass gvisor), any other is refused; unset also warns at start-up",
              ),
            seccompProfile: z
              .enum(['Localhost', 'RuntimeDefault'], { error: 'expected Localhost or RuntimeDefault' })
              .default('Localhost')
              .describe(
                "Sandbox pods' seccomp profile: Localhost, sandpit's own (installed in each node's kubelet seccomp directory, as sandpit/runc.json and sandpit/gvisor.json), or the runtime's RuntimeDefault",
              ),
            gvisorRuntimeClasses: list()
              .default(['gvisor'])
              .describe(
                "RuntimeClasses whose handler is gVisor (runsc): their pods get sandpit's gVisor profile",
              ),
          })
          .strict()
          .refine(
            (o) =>
              o.renewDeadlineSeconds < o.leaseDurationSeconds &&
              o.retryPeriodSeconds < o.renewDeadlineSeconds,
            { error: 'expected retryPeriodSeconds < renewDeadlineSeconds < leaseDurationSeconds' },
          )
          .prefault({}),
        // The egress proxy (`sandpit egress-proxy`) and how the operator points sandboxes at it.
        egress: z
          .object({
            enabled: bool()
              .default(false)
              .describe(
                'The cluster runs sandpit egress-proxy: runs with an allowlist are admitted (where NetworkPolicy is enforced)',
              ),
            networkPolicyEnforced: bool()
              .default(false)
              .describe(
                "The cluster's network plugin enforces NetworkPolicy: without it an allowlisted pod would have the node's whole network, so runs with an allowlist are refused (PolicyDenied)",
              ),
            service: z
              .string()
              .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/)
              .default('sandpit-egress-proxy')
              .describe("The proxy's Service; its cluster IP and port go into sandboxes' proxy variables"),
            namespace: NAMESPACE.optional().describe("The proxy's namespace (default: the operator's own)"),
            port: int(1, 65535).default(3128).describe('The port the proxy listens on in its pods'),
            podLabels: json(z.record(z.string(), z.string()))
              .default({ 'app.kubernetes.io/name': 'sandpit', 'app.kubernetes.io/component': 'egress-proxy' })
              .describe("The proxy pods' labels, which sandboxes' NetworkPolicies allow egress to"),
            namespaceLabels: json(z.record(z.string(), z.string()))
              .optional()
              .describe(
                "Labels of the proxy's namespace for the same (default: kubernetes.io/metadata.name, set by Kubernetes 1.21+)",
              ),
            keyFile: z
              .string()
              .min(1)
              .optional()
              .describe(
                "The key of the sandboxes' proxy credentials, shared by the operator and the proxy (the chart mounts it from a Secret)",
              ),
            listenHost: z.string().min(1).default('0.0.0.0').describe('Where sandpit egress-proxy listens'),
            probePort: int(0, 65535)
              .default(8082)
              .describe("sandpit egress-proxy's /metrics, /healthz and /readyz"),
          })
          .strict()
          .prefault({}),
        // The gateway (`sandpit mcp` / `sandpit serve` with sandbox.backend: kubernetes)
        gateway: z
          .object({
            kubeconfig: z
              .string()
              .min(1)
              .optional()
              .describe(
                "The gateway's kubeconfig (default: KUBECONFIG, the pod's service account, ~/.kube/config)",
              ),
            namespace: NAMESPACE.optional().describe(
              "Namespace the gateway creates SandboxRuns in (default: the kubeconfig context's, else default)",
            ),
            ttlSecondsAfterFinished: int(0, 31_536_000)
              .default(600)
              .describe('TTL the gateway sets on its runs: they are deleted this long after they finish'),
            pickupTimeoutSeconds: int(1, 3600)
              .default(30)
              .describe('A run no operator picks up within this time fails (ENGINE_UNAVAILABLE)'),
          })
          .strict()
          .prefault({}),
      })
      .strict()
      .prefault({}),
    audit: z
      .object({
        enabled: bool()
          .default(true)
          .describe('Write the audit file (records always go to the log too); off, nothing is refused'),
        file: z
          .string()
          .min(1)
          .optional()
          .describe(
            'The audit file (JSON Lines). Gateway default: ${XDG_STATE_HOME:-~/.local/state}/sandpit/audit.jsonl; the operator writes one only when this is set',
          ),
        maxBytes: size()
          .default(100 * 1024 ** 2)
          .describe('The file is rotated before it would grow past this'),
        maxFiles: int(1, 100).default(5).describe('Rotated files kept: audit.jsonl.1 (newest) … .N'),
        flushIntervalMs: int(0, 1000)
          .default(100)
          .describe('Longest a record waits before it is written and fsynced (0: at once)'),
        commandPreview: bool()
          .default(true)
          .describe(
            'Keep the first 80 characters of the code or argv in the audit file (never in the log; the digest is always there)',
          ),
      })
      .strict()
      .prefault({}),
    logging: z
      .object({
        level: z.enum(LOG_LEVELS, { error: `expected one of ${LOG_LEVELS.join(', ')}` }).default('info'),
      })
      .strict()
      .prefault({}),
  })
  .strict()
  .superRefine(checkTokenEgress);

export type Config = z.infer<typeof ConfigSchema>;
export type ConfigInput = z.input<typeof ConfigSchema>;
