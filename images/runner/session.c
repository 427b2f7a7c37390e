/*
 * sandpit-runner --session [--open-within SECONDS] [--no-network]: one long-lived runner per
 * session container.
 * It serves a stream of framed requests on its attached stdin and answers each in-band on
 * stdout, tagged with the request's id, so that an exec costs a process spawn rather than a
 * `docker exec`, several execs run at once, and a restarted gateway can re-attach.
 * (src/runner/session-protocol.ts is the other side; keep the two in step.)
 *
 * Start: the runner writes the unkeyed ready frame of the one-shot mode, 'R' u32be:4
 * u32be:version, then a newline (a pod's log holds a partial line back until one comes, and the
 * operator reads the frame there; the gateway's record decoder skips it), and waits for an open
 * request. Without one within --open-within seconds
 * (default 60) it exits 6, so a warm-pool container nobody claimed stops by itself. With
 * --no-network it first refuses a sandbox that has any network interface but lo, as a one-shot
 * job's 'n' record does (egress none fails closed): it writes no ready frame, says why on stderr
 * and in /dev/termination-log ({"failure": ...}), and exits 1.
 *
 * Requests (stdin): u8 type | u32be id | u32be len | body[len] | "SPQE"
 *   A body is records, u8 tag | u32be len | bytes (flags are records of length 0), except for
 *   'D', whose body is the raw bytes. A request of unknown type, one longer than MAX_REQUEST, or
 *   one whose trailer is not "SPQE" (a torn request) sends the runner hunting: it discards input
 *   up to the resync marker. Requests answer with 'A' (done) or 'F' (failed) for their id.
 *   'S' open      k key[16] (required)  T u64 TTL ms (from now)  I u64 idle ms  x u32 max execs
 *                 e NAME=VALUE (each exec's environment)  w workspace directory (absolute)
 *                 m metadata (opaque, at most 256 KiB; resync hands it back)
 *                 l u64 largest file u32 open files: each exec's RLIMIT_FSIZE and RLIMIT_NOFILE
 *                 p egress proxy socket (protocol 6): the path of the Unix socket of sandpit's egress
 *                   proxy inside the sandbox; the runner forwards 127.0.0.1:3128 to it and gives
 *                   every exec HTTP_PROXY, HTTPS_PROXY and NO_PROXY unless the session sets its own
 *                   (egress.h). The forwarder is not one of the session's processes ('P')
 *                 v NAME (protocol 7, repeatable): a variable of the runner's own environment that
 *                   every exec gets too, unless the session sets it (Kubernetes: the proxy
 *                   variables the pod has from its Sandbox's Secret); absent there, nothing
 *   'X' exec      a argv element (repeatable)  e NAME=VALUE  c cwd (workspace-relative)
 *                 t u32 deadline ms  o u32 head u32 tail: output bytes per stream
 *                 i stdin bytes | s (stdin streamed with 'D'/'Z')  y u16 cols u16 rows (a tty)
 *                 b (background)  n name (the gateway's exec id, <= 128 bytes)
 *                 -> 'B' {pid}, 'O'/'E' output, 'T' tail, then 'X' exit report
 *   'D' data      raw bytes for operation id: an exec's stdin (-> 'c' {bytes} once in its pipe),
 *                 or the next chunk of an upload
 *   'Z' end       of operation id's data: EOF of the exec's stdin, or commit of the upload
 *   'K' cancel    operation id: SIGKILL to an exec's process group; an upload is dropped (its
 *                 part file removed), a read stops              'G' resize  g u16 cols u16 rows (tty)
 *   'Y' ack       the gateway holds exec id's exit report: it moves to the exec history
 *   'I' history   (protocol 5) the acknowledged execs kept, oldest first, at most HISTORY_BYTES in
 *                 all (the newest always): per exec 'h' {id, name, argv, background, startedAgoMs,
 *                 finishedAgoMs, deadlineMs, window [head, tail], report}, then its last
 *                 RETAINED_TAIL bytes of each stream as 'T'; then 'A' {count}
 *   'W' write     p path  M u32 mode  o u64 offset | a (append)  s u64 total size (if known)
 *                 d bytes (first chunk)  z (last chunk: commit now)  -> 'A' file entry on commit
 *   'R' read      p path  m u64 most bytes  c u32 credit  B (bulk records, protocol 4)
 *                 -> 'H' file entry, 'd' data, 'A' {bytes}
 *   'C' credit    u32 more bytes the gateway takes of read id
 *   'L' list      p path  r (recursive)  n u32 most entries -> 'l' [entries]..., 'A' {count}
 *   'U' remove    p path  r (recursive)        'M' mkdir  p path (parents too) -> 'A' entry
 *   'N' watch     p path -> 'A', then 'w' {path, kind} per change   'V' unwatch watch id
 *   'P' processes -> 'A' {processes: [{pid, pgid, command}]}: those that outlived their exec
 *   'J' lifetime  T u64 TTL ms (from open)  I u64 idle ms   'H' ping   'Q' close (exit 0)
 * Resync (not a request): zeros[RESYNC_PAD] "SANDPIT-RESYNC-1" nonce[16]. The zeros complete a
 *   request the last gateway left half-written (its trailer then fails), the marker ends the hunt.
 *   The key stays the open's: a new gateway has it from where the first one kept it (the Docker
 *   backend: a container label), because under gVisor an exec can read the runner's stdin, so no
 *   key may travel there once an exec exists; a resync an exec forges only disturbs its own
 *   session. The runner aborts uploads, reads and watches (their owner is gone), answers 'Y' {nonce, opened, ageMs, ttlMs, idleMs,
 *   idleForMs, meta, lastExecId (protocol 5: the highest exec id so far), execs: [...]} first, then re-sends the output kept (the last RETAINED_TAIL
 *   bytes of each stream, as 'T') and the exit report of every exec whose report was not
 *   acknowledged (MAX_RETAINED at most, oldest dropped first). An exec still running then sends
 *   the same kept output as its tail when it ends: what it wrote while no gateway was attached.
 *
 * Frames (stdout) after the open: key[16] u8 type u8 flags u32be id u16be len data, at most
 *   PIPE_BUF bytes, each in one write(), so that nothing else writing into the pipe can land
 *   inside one. flags 1: the message goes on in the next record (JSON messages only).
 *   The one exception: the 'd' records of a read that asked for bulk ones carry up to
 *   BULK_REC_DATA bytes (16 x PIPE_BUF: a 50 MB download then costs 800 writes rather than
 *   12,000, in the runner and in every reader of the pipe after it), and may reach the pipe in
 *   more than one write. Bytes a program writes into the pipe can then land inside one: they
 *   take the place of some of the file's bytes (a file that program could rewrite anyway), and
 *   the displaced rest of the record is skipped as unkeyed. Framing holds: the record keeps its
 *   length, every other record still goes out whole, and none can be forged without the key.
 *   'A' done (JSON)  'F' failed {code, field, message}  'B' begun {pid}  'O'/'E' output
 *   'T' u8 stream (1|2) + tail bytes  'X' exit {exitCode, signal, timedOut, oomKilled, killed,
 *   stdoutBytes, stderrBytes, durationMs}  'c' stdin consumed {bytes}  'H' file entry
 *   {path, type, size, mode, mtimeMs}  'd' file data  'l' [entries]  'w' {path, kind}
 *   'Y' resync  'Z' the session ends {reason} (id 0)
 *
 * The exit reports do not rest on the program being unable to reach the runner's descriptors:
 * under runc it cannot (the runner is not dumpable, and PID 1), but under gVisor it can open
 * /proc/1/fd. There each exec runs below its own init in its own user and PID namespaces
 * (program.c), so it cannot signal or trace the runner; it can still write into the stdout pipe,
 * but without the key its bytes are skipped, and read or write the stdin pipe, which only
 * disturbs its own session: the key never travels there after the open, before any exec.
 *
 * Lifetime: the TTL counts from the open, the idle time from the last request or exec exit and
 * not while an exec runs; when either ends, the runner kills every process, writes 'Z' and
 * exits (3 TTL, 4 idle): the container stops with no gateway at all. It exits 0 on 'Q', 5 when
 * stdin ends, 6 when never opened, 7 on SIGTERM (docker stop), 1 on an internal error.
 */
#include "egress.h"
#include "program.h"
#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_META (256u << 10)
#define MAX_SESSION_ENV 1024
#define INBUF_CAP (MAX_REQUEST + 13 + (64u << 10))

char **session_env;
int n_session_env;
int max_execs = 16;
int ws_fd = -1;
char ws_path[4096] = "/workspace";
unsigned long long session_file_size;
unsigned session_open_files;

static unsigned char key[KEY_LEN];
static int opened;
static long long open_deadline, opened_at, ttl_ms, idle_ms, last_activity;
static char *meta;
static size_t meta_len;

static struct {
	char *buf;
	size_t start, len, cap, partial; /* partial: bytes of the head record already written */
} outq;

static struct {
	char *buf;
	size_t len;
	int hunting;
} in;

long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void note_activity(void)
{
	last_activity = now_ms();
}

static void fatal(const char *what)
{
	dprintf(2, "sandpit-runner: %s: %s\n", what, strerror(errno));
	exit(EXIT_FAILED);
}

uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

uint64_t be64(const unsigned char *p)
{
	return (uint64_t)be32(p) << 32 | be32(p + 4);
}

int next_rec(const char *body, size_t len, size_t *off, struct rec *r)
{
	if (*off >= len)
		return 0;
	if (len - *off < 5)
		return -1;
	uint32_t n = be32((const unsigned char *)body + *off + 1);
	if (n > len - *off - 5)
		return -1;
	r->tag = body[*off];
	r->p = body + *off + 5;
	r->len = n;
	*off += 5 + n;
	return 1;
}

/* --- output queue --- */

static void outq_reserve(size_t n)
{
	if (outq.start > 0 && outq.start + outq.len + n > outq.cap) {
		memmove(outq.buf, outq.buf + outq.start, outq.len);
		outq.start = 0;
	}
	if (outq.len + n > outq.cap) {
		size_t cap = outq.cap ? outq.cap : 65536;
		while (cap < outq.len + n)
			cap *= 2;
		char *b = realloc(outq.buf, cap);
		if (!b)
			fatal("out of memory for output");
		outq.buf = b;
		outq.cap = cap;
	}
}

static size_t record_size(const char *rec)
{
	return REC_HEAD + ((size_t)(unsigned char)rec[REC_HEAD - 2] << 8 | (unsigned char)rec[REC_HEAD - 1]);
}

static void put_record(char *dst, char type, int flags, uint32_t id, const void *data, size_t len)
{
	memcpy(dst, key, KEY_LEN);
	dst[KEY_LEN] = type;
	dst[KEY_LEN + 1] = (char)flags;
	dst[KEY_LEN + 2] = (char)(id >> 24);
	dst[KEY_LEN + 3] = (char)(id >> 16);
	dst[KEY_LEN + 4] = (char)(id >> 8);
	dst[KEY_LEN + 5] = (char)id;
	dst[KEY_LEN + 6] = (char)(len >> 8);
	dst[KEY_LEN + 7] = (char)len;
	if (len && data)
		memcpy(dst + REC_HEAD, data, len);
}

static void push_record(char type, int flags, uint32_t id, const void *data, size_t len)
{
	outq_reserve(REC_HEAD + len);
	put_record(outq.buf + outq.start + outq.len, type, flags, id, data, len);
	outq.len += REC_HEAD + len;
}

char *bulk_begin(size_t max)
{
	outq_reserve(REC_HEAD + max);
	return outq.buf + outq.start + outq.len + REC_HEAD;
}

void bulk_commit(char type, uint32_t id, size_t len)
{
	put_record(outq.buf + outq.start + outq.len, type, 0, id, NULL, len);
	outq.len += REC_HEAD + len;
}

void send_msg(char type, uint32_t id, const void *data, size_t len)
{
	const char *p = data;
	do {
		size_t n = len > REC_DATA ? REC_DATA : len;
		push_record(type, len > n ? REC_MORE : 0, id, p, n);
		p += n;
		len -= n;
	} while (len > 0);
}

void send_data(char type, uint32_t id, const void *data, size_t len)
{
	const char *p = data;
	while (len > 0) {
		size_t n = len > REC_DATA ? REC_DATA : len;
		push_record(type, 0, id, p, n);
		p += n;
		len -= n;
	}
}

int outq_full(void)
{
	return outq.len >= OUTQ_HIGH;
}

/* Writes whole records while the pipe takes them; returns -1 when stdout is gone. */
static int flush_outq(void)
{
	while (outq.len > 0) {
		char *rec = outq.buf + outq.start;
		size_t size = record_size(rec), left = size - outq.partial;
		ssize_t w = write(1, rec + outq.partial, left);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? 0 : -1;
		}
		/* A pipe takes a record of PIPE_BUF bytes whole; a bulk record, or any other stdout, may
		   take part of it. */
		if ((size_t)w < left) {
			outq.partial += (size_t)w;
			return 0;
		}
		outq.partial = 0;
		outq.start += size;
		outq.len -= size;
	}
	outq.start = 0;
	return 0;
}

/* Where a message can go before everything queued: after the head record if it is half-written. */
static size_t queue_front(void)
{
	return outq.partial > 0 && outq.len > 0 ? record_size(outq.buf + outq.start) : 0;
}

/* --- JSON text --- */

void jb_raw(struct jbuf *b, const char *s, size_t n)
{
	if (b->failed)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->failed = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = 0;
}

void jb_lit(struct jbuf *b, const char *s)
{
	jb_raw(b, s, strlen(s));
}

/* A JSON string of arbitrary bytes: quotes, backslashes and control characters escaped, the rest as is. */
void jb_str(struct jbuf *b, const char *s, size_t n)
{
	jb_raw(b, "\"", 1);
	size_t run = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c != '"' && c != '\\' && c != 0x7f)
			continue;
		jb_raw(b, s + run, i - run);
		char esc[8];
		if (c == '"' || c == '\\')
			snprintf(esc, sizeof esc, "\\%c", c);
		else
			snprintf(esc, sizeof esc, "\\u%04x", c);
		jb_lit(b, esc);
		run = i + 1;
	}
	jb_raw(b, s + run, n - run);
	jb_raw(b, "\"", 1);
}

void jb_fmt(struct jbuf *b, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof tmp) {
		b->failed = 1;
		return;
	}
	jb_raw(b, tmp, (size_t)n);
}

void jb_free(struct jbuf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

void send_json(char type, uint32_t id, struct jbuf *b)
{
	static const char oom[] = "{\"code\":\"INTERNAL\",\"message\":\"the runner is out of memory\"}";
	if (b->failed || !b->p)
		send_msg('F', id, oom, sizeof oom - 1);
	else
		send_msg(type, id, b->p, b->len);
	jb_free(b);
}

void send_error(uint32_t id, const char *code, const char *field, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	struct jbuf b = {0};
	jb_lit(&b, "{\"code\":");
	jb_str(&b, code, strlen(code));
	if (field) {
		jb_lit(&b, ",\"field\":");
		jb_str(&b, field, strlen(field));
	}
	jb_lit(&b, ",\"message\":");
	jb_str(&b, msg, strlen(msg));
	jb_lit(&b, "}");
	send_json('F', id, &b);
}

/* Wipes whole pages cheaply: the middle is dropped (it reads back as zeros), the edges zeroed. */
static void wipe(char *p, size_t n)
{
	if (!p || !n)
		return;
	uintptr_t page = 4096, a = ((uintptr_t)p + page - 1) & ~(page - 1), b = ((uintptr_t)p + n) & ~(page - 1);
	if (b > a && madvise((void *)a, b - a, MADV_DONTNEED) == 0) {
		explicit_bzero(p, a - (uintptr_t)p);
		explicit_bzero((void *)b, (uintptr_t)p + n - b);
		return;
	}
	explicit_bzero(p, n);
}

void session_scrub(void)
{
	explicit_bzero(key, sizeof key);
	wipe(in.buf, INBUF_CAP);
	wipe(outq.buf, outq.cap);
}

/* --- the session --- */

static void end_session(int code, const char *reason)
{
	exec_kill_all();
	file_abort_transfers();
	watch_clear();
	if (opened) {
		struct jbuf b = {0};
		jb_lit(&b, "{\"reason\":");
		jb_str(&b, reason, strlen(reason));
		jb_lit(&b, "}");
		send_json('Z', 0, &b);
	}
	/* Best effort, for a second at most: the reader may be gone. */
	long long until = now_ms() + 1000;
	while (outq.len > 0 && now_ms() < until) {
		if (flush_outq() < 0)
			break;
		struct pollfd p = {1, POLLOUT, 0};
		poll(&p, 1, 50);
	}
	exit(code);
}

/* Before the open there is no key: a failure then goes out as the one-shot mode's unkeyed 'F'. */
static void unkeyed_failure(const char *msg)
{
	size_t n = strlen(msg);
	unsigned char hdr[5] = {'F', (unsigned char)(n >> 24), (unsigned char)(n >> 16), (unsigned char)(n >> 8),
				(unsigned char)n};
	if (write(1, hdr, 5) == 5 && write(1, msg, n) < 0) {
	}
	exit(EXIT_FAILED);
}

static int add_env(const char *p, uint32_t n)
{
	if (n_session_env >= MAX_SESSION_ENV || memchr(p, 0, n) || !memchr(p, '=', n) || p[0] == '=')
		return -1;
	char *s = strndup(p, n);
	if (!s)
		return -1;
	session_env[n_session_env++] = s;
	session_env[n_session_env] = NULL;
	return 0;
}

/* A variable of the runner's own environment ('v'), for every exec unless the session sets it. */
static int inherit_env(const char *p, uint32_t n)
{
	if (n == 0 || n >= 256 || memchr(p, 0, n) || memchr(p, '=', n))
		return -1;
	char name[256];
	memcpy(name, p, n);
	name[n] = 0;
	const char *value = getenv(name);
	if (!value)
		return 0;
	for (int j = 0; j < n_session_env; j++)
		if (strncmp(session_env[j], name, n) == 0 && session_env[j][n] == '=')
			return 0;
	size_t len = n + 1 + strlen(value);
	char *var = malloc(len + 1);
	if (!var)
		return -1;
	snprintf(var, len + 1, "%s=%s", name, value);
	int rc = add_env(var, (uint32_t)len);
	free(var);
	return rc;
}

/* The forwarder to the egress proxy, and the variables that point every exec at it. */
static int start_egress(uint32_t id, const char *socket_path)
{
	char why[256];
	if (egress_start(socket_path, why, sizeof why) < 0) {
		send_error(id, "INTERNAL", "network", "%s", why);
		return -1;
	}
	for (size_t i = 0; EGRESS_ENV[i]; i++) {
		size_t k = (size_t)(strchr(EGRESS_ENV[i], '=') - EGRESS_ENV[i]) + 1;
		int set = 0;
		for (int j = 0; j < n_session_env; j++)
			set |= strncmp(session_env[j], EGRESS_ENV[i], k) == 0;
		if (!set && add_env(EGRESS_ENV[i], (uint32_t)strlen(EGRESS_ENV[i])) != 0) {
			send_error(id, "INTERNAL", "env", "too many environment variables");
			return -1;
		}
	}
	return 0;
}

static void do_open(uint32_t id, const char *body, size_t len)
{
	size_t off = 0;
	struct rec r;
	int have_key = 0, rc = 0;
	while (!opened && (rc = next_rec(body, len, &off, &r)) > 0) {
		if (r.tag == 'k' && r.len == KEY_LEN) {
			memcpy(key, r.p, KEY_LEN);
			have_key = 1;
		}
	}
	if (opened) /* the key stays: only the first open sets it */
		return send_error(id, "INVALID_REQUEST", NULL, "the session is open already");
	if (rc < 0 || !have_key)
		unkeyed_failure("the open request carries no key");
	session_env = calloc(MAX_SESSION_ENV + 1, sizeof *session_env);
	if (!session_env)
		fatal("out of memory");
	long long ttl = 3600000, idle = 600000;
	char egress_socket[108] = "";
	off = 0;
	while (next_rec(body, len, &off, &r) > 0) {
		switch (r.tag) {
		case 'T':
		case 'I':
			if (r.len != 8)
				return send_error(id, "INVALID_REQUEST", "ttlSeconds", "bad lifetime record");
			*(r.tag == 'T' ? &ttl : &idle) = (long long)be64((const unsigned char *)r.p);
			break;
		case 'x':
			if (r.len != 4 || be32((const unsigned char *)r.p) == 0 ||
			    be32((const unsigned char *)r.p) > MAX_EXECS_CAP)
				return send_error(id, "INVALID_REQUEST", "maxExecs", "bad max execs record");
			max_execs = (int)be32((const unsigned char *)r.p);
			break;
		case 'e':
			if (add_env(r.p, r.len) != 0)
				return send_error(id, "INVALID_REQUEST", "env", "bad environment variable");
			break;
		case 'w':
			if (r.len == 0 || r.len >= sizeof ws_path || r.p[0] != '/' || memchr(r.p, 0, r.len))
				return send_error(id, "INVALID_REQUEST", "workdir", "bad workspace directory");
			memcpy(ws_path, r.p, r.len);
			ws_path[r.len] = 0;
			break;
		case 'm':
			if (r.len > MAX_META)
				return send_error(id, "TOO_LARGE", "metadata", "metadata over %u bytes", MAX_META);
			meta = malloc(r.len ? r.len : 1);
			if (!meta)
				fatal("out of memory");
			memcpy(meta, r.p, r.len);
			meta_len = r.len;
			break;
		case 'l':
			if (r.len != 12)
				return send_error(id, "INVALID_REQUEST", "limits", "bad limits record");
			session_file_size = be64((const unsigned char *)r.p);
			session_open_files = be32((const unsigned char *)r.p + 8);
			break;
		case 'p':
			if (r.len == 0 || r.len >= sizeof egress_socket || r.p[0] != '/' || memchr(r.p, 0, r.len))
				return send_error(id, "INVALID_REQUEST", "network", "bad egress proxy socket path");
			memcpy(egress_socket, r.p, r.len);
			egress_socket[r.len] = 0;
			break;
		case 'k':
		case 'v': /* after every 'e', below: the session's own variables come first */
			break;
		default:
			return send_error(id, "INVALID_REQUEST", NULL, "unknown open record 0x%02x", (unsigned char)r.tag);
		}
	}
	off = 0;
	while (next_rec(body, len, &off, &r) > 0)
		if (r.tag == 'v' && inherit_env(r.p, r.len) != 0)
			return send_error(id, "INVALID_REQUEST", "env", "bad or too many inherited variables");
	while (strlen(ws_path) > 1 && ws_path[strlen(ws_path) - 1] == '/')
		ws_path[strlen(ws_path) - 1] = 0;
	ws_fd = open(ws_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (ws_fd < 0)
		return send_error(id, "INTERNAL", "workdir", "cannot open the workspace %s: %s", ws_path, strerror(errno));
	if (egress_socket[0] && start_egress(id, egress_socket) != 0)
		return;
	ttl_ms = ttl;
	idle_ms = idle;
	opened = 1;
	opened_at = last_activity = now_ms();
	struct jbuf b = {0};
	jb_fmt(&b, "{\"version\":%u}", SESSION_PROTOCOL_VERSION);
	send_json('A', id, &b);
}

static void do_lifetime(uint32_t id, const char *body, size_t len)
{
	size_t off = 0;
	struct rec r;
	int rc;
	long long ttl = ttl_ms, idle = idle_ms;
	while ((rc = next_rec(body, len, &off, &r)) > 0) {
		if ((r.tag != 'T' && r.tag != 'I') || r.len != 8)
			return send_error(id, "INVALID_REQUEST", "ttlSeconds", "bad lifetime record");
		*(r.tag == 'T' ? &ttl : &idle) = (long long)be64((const unsigned char *)r.p);
	}
	if (rc < 0)
		return send_error(id, "INVALID_REQUEST", NULL, "malformed request");
	ttl_ms = ttl;
	idle_ms = idle;
	send_msg('A', id, "{}", 2);
}

static void hex(char *out, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", p[i]);
}

static void do_resync(const unsigned char *nonce)
{
	file_abort_transfers();
	watch_clear();
	size_t insert_at = queue_front();
	char nonce_hex[2 * KEY_LEN + 1];
	hex(nonce_hex, nonce, KEY_LEN);
	long long now = now_ms();
	struct jbuf b = {0};
	jb_fmt(&b, "{\"nonce\":\"%s\",\"version\":%u,\"opened\":%s", nonce_hex, SESSION_PROTOCOL_VERSION,
	       opened ? "true" : "false");
	if (opened) {
		jb_fmt(&b, ",\"ageMs\":%lld,\"ttlMs\":%lld,\"idleMs\":%lld,\"idleForMs\":%lld,\"meta\":", now - opened_at,
		       ttl_ms, idle_ms, exec_running() ? 0 : now - last_activity);
		jb_str(&b, meta ? meta : "", meta_len);
		jb_fmt(&b, ",\"lastExecId\":%u,\"execs\":", exec_last_id());
		exec_describe(&b);
	}
	jb_lit(&b, "}");
	/* The reply goes out before anything queued: the new gateway must learn the execs first. */
	size_t tail = outq.len - insert_at;
	send_json('Y', 0, &b);
	size_t added = outq.len - insert_at - tail;
	char *base = outq.buf + outq.start + insert_at;
	char *moved = malloc(added);
	if (!moved)
		fatal("out of memory");
	memcpy(moved, base + tail, added);
	memmove(base + added, base, tail);
	memcpy(base, moved, added);
	free(moved);
	exec_resend_retained();
	dprintf(2, "sandpit-runner: resynchronised with a new gateway\n");
}

static int known_type(char t)
{
	return t && strchr("SXDZKGYWRCLUMNVPJHQI", t) != NULL;
}

static void dispatch(char type, uint32_t id, const char *body, size_t len)
{
	if (type == 'S')
		return do_open(id, body, len);
	if (!opened)
		return; /* nothing keyed can answer yet, and only the open may come first */
	if (strchr("XDZKWRLUMN", type))
		note_activity();
	switch (type) {
	case 'X':
		return exec_start(id, body, len);
	case 'D':
		if (!file_upload_data(id, body, len))
			exec_data(id, body, len);
		return;
	case 'Z':
		if (!file_upload_end(id))
			exec_eof(id);
		return;
	case 'K':
		if (!file_cancel(id))
			exec_kill(id);
		return;
	case 'G':
		return exec_resize(id, body, len);
	case 'Y':
		return exec_ack(id);
	case 'W':
		return file_write(id, body, len);
	case 'R':
		return file_read(id, body, len);
	case 'C':
		return file_read_credit(id, body, len);
	case 'L':
		return file_list(id, body, len);
	case 'U':
		return file_remove(id, body, len);
	case 'M':
		return file_mkdir(id, body, len);
	case 'N':
		return watch_add(id, body, len);
	case 'V':
		return watch_remove(id);
	case 'P':
		return processes_reply(id);
	case 'I':
		return exec_history(id);
	case 'J':
		return do_lifetime(id, body, len);
	case 'H':
		return send_msg('A', id, "{}", 2);
	case 'Q':
		send_msg('A', id, "{}", 2);
		return end_session(EXIT_CLOSED, "Closed");
	}
}

static void start_hunting(const char *why)
{
	if (!in.hunting)
		dprintf(2, "sandpit-runner: %s; discarding input up to a resync\n", why);
	in.hunting = 1;
}

/* Handles every whole request (or resync) in the input buffer, keeping the rest. */
static void process_input(void)
{
	const size_t mlen = sizeof RESYNC_MARKER - 1;
	size_t off = 0;
	for (;;) {
		if (in.hunting) {
			char *m = memmem(in.buf + off, in.len - off, RESYNC_MARKER, mlen);
			if (!m) {
				if (in.len - off > mlen)
					off = in.len - (mlen - 1);
				break;
			}
			size_t at = (size_t)(m - in.buf);
			if (in.len - at < mlen + KEY_LEN) {
				off = at;
				break;
			}
			in.hunting = 0;
			do_resync((unsigned char *)in.buf + at + mlen);
			off = at + mlen + KEY_LEN;
			continue;
		}
		if (in.len - off < 9)
			break;
		char type = in.buf[off];
		uint32_t id = be32((unsigned char *)in.buf + off + 1);
		uint32_t blen = be32((unsigned char *)in.buf + off + 5);
		if (!known_type(type) || blen > MAX_REQUEST) {
			start_hunting("a request of unknown type or size");
			off += 1;
			continue;
		}
		if (in.len - off < 13 + (size_t)blen)
			break;
		if (memcmp(in.buf + off + 9 + blen, TRAILER, 4) != 0) {
			start_hunting("a torn request");
			off += 13 + blen;
			continue;
		}
		dispatch(type, id, in.buf + off + 9, blen);
		off += 13 + blen;
	}
	if (off > 0) {
		memmove(in.buf, in.buf + off, in.len - off);
		in.len -= off;
	}
}

static void on_stdin(void)
{
	for (;;) {
		if (in.len == INBUF_CAP) { /* cannot happen: a whole request always fits */
			in.len = 0;
			start_hunting("an overlong request");
		}
		ssize_t n = read(0, in.buf + in.len, INBUF_CAP - in.len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0)
			end_session(EXIT_STDIN_CLOSED, "StdinClosed");
		in.len += (size_t)n;
		process_input();
		if (outq_full())
			return;
	}
}

static long long next_timer(long long now)
{
	long long t = LLONG_MAX;
	if (!opened)
		t = open_deadline;
	else {
		t = opened_at + ttl_ms;
		if (!exec_running() && last_activity + idle_ms < t)
			t = last_activity + idle_ms;
	}
	long long d = exec_next_deadline();
	if (d && d < t)
		t = d;
	d = watch_next_flush();
	if (d && d < t)
		t = d;
	return t - now;
}

static void check_timers(long long now)
{
	exec_check_deadlines(now);
	watch_flush(now);
	if (!opened && now >= open_deadline) {
		dprintf(2, "sandpit-runner: no session was opened in time\n");
		exit(EXIT_NEVER_OPENED);
	}
	if (opened && now >= opened_at + ttl_ms)
		end_session(EXIT_TTL, "TTLExpired");
	if (opened && !exec_running() && now >= last_activity + idle_ms)
		end_session(EXIT_IDLE, "IdleExpired");
}

#define MAX_POLL 1024

int session_main(int argc, char **argv)
{
	long long open_within = 60;
	int no_network = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--open-within") == 0 && i + 1 < argc)
			open_within = atoll(argv[++i]);
		else if (strcmp(argv[i], "--no-network") == 0)
			no_network = 1;
		else if (strcmp(argv[i], "--session") != 0) {
			fprintf(stderr, "usage: sandpit-runner --session [--open-within SECONDS] [--no-network]\n");
			return 2;
		}
	}
	char why[256];
	if (no_network && network_refusal(why, sizeof why) != 0) {
		dprintf(2, "sandpit-runner: %s\n", why);
		write_termination_failure(why);
		return EXIT_FAILED;
	}
	prctl(PR_SET_DUMPABLE, 0);
	if (getpid() != 1)
		prctl(PR_SET_CHILD_SUBREAPER, 1); /* outside a container (tests): orphans still come to us */
	signal(SIGPIPE, SIG_IGN);
	signal(SIGXFSZ, SIG_IGN); /* a write over the file size limit fails with EFBIG instead */
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		fatal("signalfd");
	in.buf = malloc(INBUF_CAP);
	if (!in.buf)
		fatal("out of memory");

	const unsigned char ready[10] = {'R', 0, 0, 0, 4, SESSION_PROTOCOL_VERSION >> 24, SESSION_PROTOCOL_VERSION >> 16 & 0xff,
					 SESSION_PROTOCOL_VERSION >> 8 & 0xff, SESSION_PROTOCOL_VERSION & 0xff, '\n'};
	if (write(1, ready, sizeof ready) != (ssize_t)sizeof ready)
		fatal("write");
	fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
	fcntl(1, F_SETFL, fcntl(1, F_GETFL) | O_NONBLOCK);
	/* Roomier pipes both ways: the runner and the engine's shim move more per wakeup (an upload
	   arrives in 1 MiB requests, a download leaves in 64 KiB records). Best effort: either may not
	   be a pipe, or the kernel may refuse. */
	fcntl(0, F_SETPIPE_SZ, STDIO_PIPE_BYTES);
	fcntl(1, F_SETPIPE_SZ, STDIO_PIPE_BYTES);
	open_deadline = now_ms() + open_within * 1000;

	static struct pollfd pfds[MAX_POLL];
	static void *owners[MAX_POLL];
	for (;;) {
		if (!outq_full())
			exec_pump();
		if (!outq_full())
			file_pump_reads();
		if (flush_outq() < 0)
			end_session(EXIT_STDIN_CLOSED, "StdoutClosed");
		int n = 0;
		pfds[n++] = (struct pollfd){sfd, POLLIN, 0};
		pfds[n++] = (struct pollfd){outq.len > 0 ? 1 : -1, POLLOUT, 0};
		pfds[n++] = (struct pollfd){outq.len < 2 * OUTQ_HIGH ? 0 : -1, POLLIN, 0};
		pfds[n++] = (struct pollfd){watch_fd(), POLLIN, 0};
		int fixed = n;
		n += exec_pollfds(pfds + n, MAX_POLL - n, owners + n);
		long long now = now_ms();
		long long wait = next_timer(now);
		int timeout = wait <= 0 ? 0 : wait > 60000 ? 60000 : (int)wait;
		if (outq.len == 0 && file_reads_pending() && !outq_full())
			timeout = 0;
		if (poll(pfds, (nfds_t)n, timeout) < 0 && errno != EINTR)
			fatal("poll");
		if (pfds[0].revents & POLLIN) {
			struct signalfd_siginfo si;
			int stop = 0;
			while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
				stop |= si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT;
			exec_on_sigchld();
			if (stop)
				end_session(EXIT_STOPPED, "Stopped");
		}
		if (pfds[2].revents)
			on_stdin();
		if (pfds[3].revents & POLLIN)
			watch_on_events();
		for (int i = fixed; i < n; i++)
			if (pfds[i].revents)
				exec_on_poll(owners[i], pfds[i].fd, pfds[i].revents);
		check_timers(now_ms());
	}
}
