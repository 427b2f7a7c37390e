/*
 * sandpit-runner: the main process of every sandbox container.
 *
 * It waits for exactly one framed job on stdin, sets up the workspace, runs the job's argv as a
 * child, and reports the child's output and exit status in-band on stdout. The container is never
 * reused: after the exit frame the runner waits for its owner to hang up (linger()), then exits,
 * and the engine removes the container.
 *
 * The child must not be able to forge, suppress or stall that report:
 *   - Under runc the kernel keeps it away from the runner: the runner is not dumpable (its
 *     /proc/1/fd and /proc/1/mem are root's) and, as PID 1 of its namespace, it ignores the
 *     child's signals.
 *   - gVisor (runsc) reproduces neither: there a same-uid process may open /proc/1/fd/1 and kill
 *     PID 1. So under gVisor the child runs in its own user and PID namespaces, below a small init
 *     (spawn_isolated, program.c): it cannot name the runner's process, so it can neither signal nor trace
 *     it. The Sentry implements those namespaces itself: they add no host-kernel surface.
 *   - What the child can still do under gVisor is open the runner's stdin, stdout and stderr
 *     through /proc/1/fd: its own PID namespace does not hide the container's /proc, and runsc lets
 *     no user namespace mount one of its own (program.h). So every frame after the job starts with
 *     the job's 16-byte key and goes out in one write() of at most PIPE_BUF bytes, which a pipe
 *     never interleaves with another writer's. The child cannot learn the key (the runner's memory
 *     is root's to read, its stdout cannot be read back), and the gateway skips everything else
 *     that arrives.
 *   - In --plain mode nothing is framed: the pod log is the runner's stdout and stderr. So under
 *     gVisor the runner holds them in no descriptor while the program runs (stash_fds, program.h)
 *     and keeps the head too; once no process of the program is left, it writes the head (both
 *     streams in the order they came), the line saying what it left out, and the tail.
 *
 * Job (stdin):   "SPJ3" key[16] u32be:len  records...   record = u8:type u32be:len bytes
 *   'a' argv element (repeatable, at least one)   'e' NAME=VALUE (repeatable)
 *   'f' file: u8 flags(1=exec) u16be:pathlen path content (repeatable)
 *   'c' code: exposed to the child as a sealed read-only memfd on fd 3 (/sandpit/code/main.* link to it)
 *   'i' stdin content (else /dev/null)            't' u32be deadline in ms (from job receipt)
 *   'w' working directory (default /workspace)    'o' u32be head u32be tail: output bytes kept per stream
 *   'l' u64be largest file, u32be open files: the child's RLIMIT_FSIZE and RLIMIT_NOFILE (pods have
 *       no ulimits of their own)
 *   'n' no network: refuse the job if any interface but lo exists (egress none must fail closed,
 *       e.g. on a cluster that does not enforce NetworkPolicy)
 *   'g' an outputs entry, a workspace path or glob (repeatable; protocol 5, outputs.c)
 *   'G' u32be most files, u32be most bytes: the caps of what the outputs entries collect
 *   'p' egress proxy socket (protocol 4): the absolute path of the Unix socket of sandpit's egress
 *       proxy inside the sandbox (Docker: the gateway's, mounted in). The runner forwards
 *       127.0.0.1:3128 to it and sets HTTP_PROXY, HTTPS_PROXY and NO_PROXY for the program, where
 *       the job sets none of its own (egress.h)
 *   'v' NAME (protocol 4, repeatable): pass the runner's own NAME=value on to the program, unless the
 *       job sets NAME itself (Kubernetes: the proxy variables a pod gets from its run's Secret, whose
 *       credential no ConfigMap holds)
 *   Protocol 2's job, "SPJ1" u32be:len records..., is still taken; its frames then carry no key.
 * Frames (stdout) after the job: key[16] u8:type u16be:len bytes, RECORD_MAX bytes at most
 *   'O'/'E' stdout/stderr chunk   'T' u8 stream(1|2) + the next piece of the last bytes kept
 *   'X' exit: JSON {exitCode, signal, timedOut, oomKilled, stdoutBytes, stderrBytes, durationMs}
 *   'F' failure of the runner itself: text (the job never ran)
 *   Protocol 5, before 'X', once the program and whatever it left are gone (only when the job has
 *   'g' records): for each file collected, 'P' u32be size + its workspace path, then its bytes in
 *   'D' frames (up to 65535 bytes each: no other writer is left by then); for each entry or file not collected, 'S' u8 reason (outputs.h), u16be entry
 *   length, the entry, and what happened.
 * Before the job (and in protocol 2): u8:type u32be:len bytes
 *   'R' ready: u32be protocol version (PROTOCOL_VERSION; src/runner/protocol.ts must accept it)
 *
 * While the job runs, the end of stdin means that its owner is gone: the runner kills the child
 * and exits, so an orphaned container stops by itself.
 *
 * `--session`: the session mode, a long-lived runner serving many requests (session.c).
 *
 * `--job FILE --plain`: read the job from FILE and pass the child's output on to our stdout and
 * stderr (Kubernetes pods, where the pod log is the output), each stream capped like a framed one:
 * its head live (under gVisor: once the program is gone), then a line saying how much was left
 * out, then its tail. Exit with the child's
 * status, and write the exit JSON (or {"failure": text} when the job never ran) to
 * /dev/termination-log when it exists.
 *
 * `--pool`: a pool pod's runner (Kubernetes warm pools, src/runner/exit-trailer.ts). It waits on
 * stdin for one protocol-3 job (a keyed one: its key signs the trailer). Its first byte starts a
 * clock: no complete job within POOL_JOB_MS, or stdin ending first, is a failure with exit 125 and
 * nothing on stdout (there is no key to sign a trailer with). With the job it behaves exactly like
 * `--plain`, then writes the exit trailer on stdout as its last write, one write() of at most
 * PIPE_BUF bytes: "\n" RS "sandpit-exit " <key hex> " " <exit JSON or {"failure": text}> "\n". A job
 * it refuses once read (a bad record, a network where egress is none) gets the failure trailer.
 * The end of stdin after the job does not stop the program (its deadline and the pod's bound it).
 * The job's format is protocol 3's, unchanged: the mode is chosen by the pod's command, and a runner
 * without it refuses `--pool` with its usage (exit 2), which the pod's status shows.
 */
#define _GNU_SOURCE
#include "egress.h"
#include "outputs.h"
#include "program.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_JOB (256u << 20)
#define MAX_ARGS 1024
#define MAX_ENV 512
#define MAX_OUTPUTS 64
#define CODE_FD 3
/* Bump with every change to the job or frame format, together with src/runner/protocol.ts. */
#define PROTOCOL_VERSION 5u
#define KEY_LEN 16
/* PIPE_BUF: a pipe takes a write of at most this size in one piece, never mixed with another's. */
#define RECORD_MAX 4096
#define RECORD_HEAD (KEY_LEN + 3)
#define RECORD_DATA (RECORD_MAX - RECORD_HEAD)
/* A collected file's data records: once no process of the program is left, nothing else writes
   to our stdout, so they need not fit PIPE_BUF; larger ones cross the engine's pipes faster. */
#define FILE_RECORD_DATA (65535u)
/* The stdout pipe size asked for while files go out (as session mode's; best effort). */
#define FILES_PIPE_BYTES (1 << 20)
/* --pool: how long a job may take to arrive once its first byte has. */
#define POOL_JOB_MS 10000
/* After the exit frame, how long the runner waits at most for its owner to hang up (linger()). */
#define LINGER_MS 5000

struct stream {
	int fd;
	char id;                /* 'O' or 'E' */
	unsigned long long total;
	size_t head_left;       /* bytes still forwarded live */
	struct ring tail;
};

static char *job_args[MAX_ARGS + 1];
static int n_args;
static char *job_env[MAX_ENV + 32]; /* the job's, then the base, egress and inherited ones */
static int n_env;
static const char *code_data, *stdin_data, *workdir = "/workspace";
static size_t code_len, stdin_len;
static int have_stdin;
static uint32_t deadline_ms, out_head = UINT32_MAX, out_tail, open_files;
static unsigned long long file_size; /* 0: leave RLIMIT_FSIZE as it is */
static int no_network;
/* Protocol 5: the outputs entries to collect once the program is gone, and their caps. */
static char *outputs[MAX_OUTPUTS];
static int n_outputs;
static struct output_caps output_caps = {32, 16u << 20};
static const char *egress_socket; /* 'p': the egress proxy's socket, when the job has egress */
/* 'v': the runner's own variables the program gets too, added after the job's (which win). */
#define MAX_INHERITED 16
static char *inherited[MAX_INHERITED];
static int n_inherited;
static int plain;
/* --pool: plain, plus the exit trailer; job_read once the whole job is in (a failure then gets a trailer). */
static int pool, job_read;
static long long pool_deadline; /* 0 until the job's first byte */
/* Set by a protocol-3 job: every frame from then on starts with its key. */
static int keyed;
static unsigned char channel_key[KEY_LEN];
static char *job;
static size_t job_len;
/* --plain under gVisor: the socket our stdout and stderr wait on while the program runs (-1: not stashed). */
static int stdio_stash = -1;
static const int STDIO[2] = {1, 2};
/* ... and the head of both streams, in the order it came: records u8 fd, u32 length, bytes. */
static struct {
	char *buf;
	size_t len, cap;
} held;
static pid_t program_group; /* what kill_all() kills when we are not PID 1 */

/*
 * --preload: the job's interpreter, started while the runner waits for the job (preload_start).
 * An image may hold one preloader, PRELOAD_DIR/NAME: a program NAME runs (`NAME PRELOAD_DIR/NAME`)
 * that starts as NAME would, then waits on PRELOAD_CTL_FD for the job's details and runs the job's
 * script as `NAME SCRIPT` would have (images/runner/preload/python3). It serves only a job whose
 * command is exactly NAME and one absolute path, with code and a key, and whose variables are the
 * ones the preloader started with: the variables given with --env, in order (a
 * pool's template's), then the base ones. Any other job is run as always, once the
 * preloaded process is gone. Its stdin and code memfds are made empty ahead, and filled and sealed
 * when the job comes: what the program sees is what a program started for the job sees.
 */
#define PRELOAD_DIR "/usr/local/lib/sandpit/preload"
#define PRELOAD_CTL_FD 4
static int preload;
static char *preload_env[MAX_ENV + 8]; /* --env NAME=VALUE..., then the base variables; NULL-ended */
static int n_preload_env;            /* how many came with --env */
static struct {
	struct spawned child; /* pid 0: none waiting */
	int code_fd, in_fd;   /* its fd 3 and fd 0, empty until the job */
	int ctl_fd;           /* the pipe its PRELOAD_CTL_FD reads the job's details from */
	int out_fd, err_fd;   /* our ends of its stdout and stderr */
	char name[NAME_MAX + 1];
	char path[sizeof PRELOAD_DIR + NAME_MAX + 1];
} pre = {{0, -1}, -1, -1, -1, -1, -1, "", ""};

static void die_frame(const char *fmt, ...);
static int release_stdio(void);
static int program_gone(void);
static int preload_kill(void);
static void write_trailer(const char *json, size_t len);
static long long now_ms(void);
int session_main(int argc, char **argv); /* session.c */

static void write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n > 0) {
		ssize_t w = write(fd, c, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			_exit(111); /* our reader is gone: nothing left to report to */
		}
		c += w;
		n -= (size_t)w;
	}
}

/* A keyed frame's head: the job's key, the type, u16be the payload's length. */
static void record_head(unsigned char *p, char type, size_t len)
{
	memcpy(p, channel_key, KEY_LEN);
	p[KEY_LEN] = (unsigned char)type;
	p[KEY_LEN + 1] = (unsigned char)(len >> 8);
	p[KEY_LEN + 2] = (unsigned char)len;
}

static void frame(char type, const void *data, size_t len)
{
	if (plain)
		return;
	if (!keyed) {
		unsigned char hdr[5] = {(unsigned char)type, (unsigned char)(len >> 24), (unsigned char)(len >> 16),
					(unsigned char)(len >> 8), (unsigned char)len};
		write_all(1, hdr, 5);
		if (len)
			write_all(1, data, len);
		return;
	}
	const char *p = data;
	do {
		size_t n = len < RECORD_DATA ? len : RECORD_DATA;
		unsigned char rec[RECORD_MAX];
		record_head(rec, type, n);
		memcpy(rec + RECORD_HEAD, p, n);
		write_all(1, rec, RECORD_HEAD + n); /* one write: a pipe keeps it whole */
		p += n;
		len -= n;
	} while (len > 0);
}

static void die_frame(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	preload_kill();
	if (plain) {
		release_stdio();
		dprintf(2, "sandpit-runner: %s\n", msg);
		write_termination_failure(msg);
		if (pool && job_read) {
			char json[1200];
			size_t n = 0;
			json[n++] = '{';
			n += (size_t)snprintf(json + n, sizeof json - n, "\"failure\":\"");
			for (const char *c = msg; *c && n < sizeof json - 8; c++) {
				unsigned char ch = (unsigned char)*c;
				if (ch == '"' || ch == '\\')
					json[n++] = '\\', json[n++] = (char)ch;
				else if (ch < 0x20)
					n += (size_t)snprintf(json + n, sizeof json - n, "\\u%04x", ch);
				else
					json[n++] = (char)ch;
			}
			json[n++] = '"';
			json[n++] = '}';
			write_trailer(json, n);
		}
	} else {
		frame('F', msg, strlen(msg));
	}
	exit(plain ? 125 : 0);
}

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* --pool: waits for stdin to be readable, within the job's clock once its first byte came. */
static void pool_wait(int fd)
{
	for (;;) {
		int timeout = -1;
		if (pool_deadline) {
			long long left = pool_deadline - now_ms();
			if (left <= 0)
				die_frame("no job arrived within %d s of its first byte", POOL_JOB_MS / 1000);
			timeout = (int)left;
		}
		struct pollfd p = {fd, POLLIN, 0};
		int n = poll(&p, 1, timeout);
		if (n > 0)
			return;
		if (n < 0 && errno != EINTR)
			die_frame("no job arrived: poll: %s", strerror(errno));
	}
}

static int read_full(int fd, void *p, size_t n)
{
	char *c = p;
	while (n > 0) {
		if (pool)
			pool_wait(fd);
		ssize_t r = read(fd, c, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		if (pool && !pool_deadline)
			pool_deadline = now_ms() + POOL_JOB_MS;
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

static char *read_job(int fd, size_t *len)
{
	unsigned char hdr[4];
	if (read_full(fd, hdr, 4) != 0) {
		if (pool)
			die_frame("no job arrived: stdin ended first");
		exit(0); /* closed before any job: a pool container being retired */
	}
	if (memcmp(hdr, "SPJ3", 4) == 0) {
		if (read_full(fd, channel_key, KEY_LEN) != 0)
			die_frame("job truncated");
		keyed = 1;
	} else if (pool || memcmp(hdr, "SPJ1", 4) != 0) {
		die_frame("no job arrived: bad job header");
	}
	if (read_full(fd, hdr, 4) != 0)
		die_frame("no job arrived: job truncated");
	*len = be32(hdr);
	if (*len > MAX_JOB)
		die_frame("no job arrived: job of %zu bytes is too large", *len);
	char *buf = malloc(*len + 1);
	if (!buf || read_full(fd, buf, *len) != 0)
		die_frame("no job arrived: job truncated");
	job_read = 1;
	return buf;
}

static char *dupstr(const char *p, size_t n)
{
	char *s = malloc(n + 1);
	if (!s)
		die_frame("out of memory");
	memcpy(s, p, n);
	s[n] = 0;
	if (strlen(s) != n)
		die_frame("NUL byte inside a text field");
	return s;
}

/* A workspace path: relative, no empty, "." or ".." segments. */
static int safe_path(const char *p)
{
	if (!*p || *p == '/')
		return 0;
	for (const char *s = p; *s;) {
		const char *e = strchrnul(s, '/');
		size_t n = (size_t)(e - s);
		if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
			return 0;
		s = *e ? e + 1 : e;
	}
	return 1;
}

static void write_file(const char *path, const char *data, size_t len, int exec)
{
	if (!safe_path(path))
		die_frame("unsafe file path: %s", path);
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s", path);
	for (char *s = dir; (s = strchr(s, '/')); s++) {
		*s = 0;
		if (mkdir(dir, 0755) != 0 && errno != EEXIST)
			die_frame("cannot create directory %s: %s", dir, strerror(errno));
		*s = '/';
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, exec ? 0755 : 0644);
	if (fd < 0)
		die_frame("cannot create %s: %s", path, strerror(errno));
	while (len > 0) {
		ssize_t w = write(fd, data, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			die_frame("cannot write %s: %s", path, strerror(errno));
		data += w;
		len -= (size_t)w;
	}
	close(fd);
}

static void parse_job(char *buf, size_t len, int write_files)
{
	size_t off = 0;
	while (off < len) {
		if (len - off < 5)
			die_frame("job record truncated");
		char type = buf[off];
		uint32_t n = be32((unsigned char *)buf + off + 1);
		off += 5;
		if (n > len - off)
			die_frame("job record overruns the job");
		char *p = buf + off;
		off += n;
		if (write_files != (type == 'f'))
			continue; /* pass one reads everything but files; pass two writes the files */
		switch (type) {
		case 'a':
			if (n_args >= MAX_ARGS)
				die_frame("too many arguments");
			job_args[n_args++] = dupstr(p, n);
			break;
		case 'e':
			if (n_env >= MAX_ENV)
				die_frame("too many environment variables");
			job_env[n_env++] = dupstr(p, n);
			break;
		case 'f': {
			if (n < 3)
				die_frame("file record truncated");
			size_t plen = (size_t)((unsigned char)p[1] << 8 | (unsigned char)p[2]);
			if (plen > n - 3)
				die_frame("file path overruns its record");
			char *path = dupstr(p + 3, plen);
			write_file(path, p + 3 + plen, n - 3 - plen, p[0] & 1);
			free(path);
			break;
		}
		case 'c':
			code_data = p;
			code_len = n;
			break;
		case 'i':
			stdin_data = p;
			stdin_len = n;
			have_stdin = 1;
			break;
		case 't':
			if (n != 4)
				die_frame("bad deadline record");
			deadline_ms = be32((unsigned char *)p);
			break;
		case 'w':
			workdir = dupstr(p, n);
			break;
		case 'o':
			if (n != 8)
				die_frame("bad output record");
			out_head = be32((unsigned char *)p);
			out_tail = be32((unsigned char *)p + 4);
			break;
		case 'l':
			if (n != 12)
				die_frame("bad limits record");
			file_size = (unsigned long long)be32((unsigned char *)p) << 32 | be32((unsigned char *)p + 4);
			open_files = be32((unsigned char *)p + 8);
			break;
		case 'n':
			no_network = 1;
			break;
		case 'g':
			if (n_outputs >= MAX_OUTPUTS)
				die_frame("too many outputs entries");
			outputs[n_outputs++] = dupstr(p, n);
			break;
		case 'G':
			if (n != 8)
				die_frame("bad outputs caps record");
			output_caps.max_files = be32((unsigned char *)p);
			output_caps.max_bytes = be32((unsigned char *)p + 4);
			break;
		case 'p':
			egress_socket = dupstr(p, n);
			break;
		case 'v': {
			char *name = dupstr(p, n);
			const char *value = getenv(name);
			if (n_inherited >= MAX_INHERITED || strchr(name, '='))
				die_frame("bad or too many inherited variables");
			if (value) {
				size_t len = n + 1 + strlen(value) + 1;
				char *var = malloc(len);
				if (!var)
					die_frame("out of memory");
				snprintf(var, len, "%s=%s", name, value);
				inherited[n_inherited++] = var;
			}
			free(name);
			break;
		}
		default:
			die_frame("unknown job record type 0x%02x", (unsigned char)type);
		}
	}
	if (!write_files && n_args == 0)
		die_frame("job has no command");
}

/* Fills an empty memfd with `data` and seals it, so that nobody (the child included) can ever change it. */
static void seal_memfd(int fd, const char *name, const char *data, size_t len)
{
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fd, data + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			die_frame("cannot stage %s: %s", name, strerror(errno));
		off += (size_t)w;
	}
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) != 0)
		die_frame("cannot seal %s: %s", name, strerror(errno));
	lseek(fd, 0, SEEK_SET);
}

/* A memfd holding `data`, sealed. */
static int sealed_memfd(const char *name, const char *data, size_t len)
{
	int fd = memfd_create(name, MFD_ALLOW_SEALING);
	if (fd < 0)
		die_frame("memfd_create: %s", strerror(errno));
	seal_memfd(fd, name, data, len);
	return fd;
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void hold(int fd, const char *p, size_t n)
{
	size_t need = held.len + 5 + n;
	if (need > held.cap) {
		size_t cap = held.cap ? held.cap : 65536;
		while (cap < need)
			cap *= 2;
		char *b = realloc(held.buf, cap);
		if (!b)
			die_frame("out of memory holding the output");
		held.buf = b;
		held.cap = cap;
	}
	uint32_t len = (uint32_t)n;
	held.buf[held.len] = (char)fd;
	memcpy(held.buf + held.len + 1, &len, 4);
	memcpy(held.buf + held.len + 5, p, n);
	held.len = need;
}

static void forward(struct stream *s, const char *p, size_t n)
{
	s->total += n;
	size_t live = n < s->head_left ? n : s->head_left;
	if (live) {
		if (plain && stdio_stash >= 0)
			hold(s->id == 'O' ? 1 : 2, p, live);
		else if (plain)
			write_all(s->id == 'O' ? 1 : 2, p, live);
		else
			frame(s->id, p, live);
		s->head_left -= live;
	}
	ring_push(&s->tail, p + live, n - live);
}

static void send_tail(struct stream *s)
{
	if (s->tail.len == 0)
		return;
	/* Protocol 2 takes the tail as one frame; keyed, each record carries its stream byte. */
	size_t piece = keyed ? RECORD_DATA - 1 : s->tail.len;
	char *out = malloc(piece + 1);
	if (!out)
		return;
	out[0] = s->id == 'O' ? 1 : 2;
	for (size_t done = 0; done < s->tail.len;) {
		size_t n = s->tail.len - done < piece ? s->tail.len - done : piece;
		for (size_t i = 0; i < n; i++)
			out[1 + i] = s->tail.buf[(s->tail.start + done + i) % s->tail.cap];
		frame('T', out, n + 1);
		done += n;
	}
	free(out);
}

static void kill_all(pid_t child)
{
	if (getpid() == 1)
		kill(-1, SIGKILL); /* everything in our PID namespace, escapees included */
	else
		kill(-child, SIGKILL);
}

/*
 * --plain under gVisor: takes our stdout and stderr back once no process but ours is left (killing
 * and reaping whatever is), and writes the head held meanwhile. Should something outlive every kill
 * for 5 s, they stay /dev/null and the output is lost: never handed to it. Returns -1 then.
 */
static int release_stdio(void)
{
	if (stdio_stash < 0)
		return 0;
	int sock = stdio_stash;
	stdio_stash = -1;
	int alone = 0;
	for (int i = 0; i < 500 && !alone; i++) {
		if (program_group > 0)
			kill_all(program_group);
		while (waitpid(-1, NULL, WNOHANG) > 0) {
		}
		alone = others_alive() == 0;
		if (!alone)
			usleep(10000);
	}
	if (!alone) {
		close(sock); /* the stashed descriptors go with it */
		return -1;
	}
	if (unstash_fds(sock, STDIO, 2) != 0)
		return -1;
	for (size_t off = 0; off < held.len;) {
		uint32_t len;
		memcpy(&len, held.buf + off + 1, 4);
		write_all(held.buf[off], held.buf + off + 5, len);
		off += 5 + len;
	}
	held.len = 0;
	return 0;
}

/* What the program's process starts with: its descriptors (-1: none), command and environment. */
struct launch {
	int out, err, code, in, ctl; /* ctl: a preloader's control pipe (PRELOAD_CTL_FD) */
	char **argv, **envp;
	int isolate; /* under gVisor, below its own init (spawn) */
};

/* Moves `fd` to `to` (closing `to` when fd is -1). */
static void place_fd(int fd, int to)
{
	if (fd < 0) {
		close(to);
	} else if (dup2(fd, to) < 0) {
		_exit(126);
	} else {
		close(fd);
	}
}

static void exec_child(const struct launch *l)
{
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	setpgid(0, 0);
	if (program_limits(file_size, open_files) != 0)
		_exit(126);
	/* Move the memfd and the control pipe out of the way first so the dup2s below cannot clobber them. */
	int code_fd = l->code >= 0 ? fcntl(l->code, F_DUPFD, 10) : -1;
	int ctl_fd = l->ctl >= 0 ? fcntl(l->ctl, F_DUPFD, 10) : -1;
	if (dup2(l->in, 0) < 0 || (l->out >= 0 && dup2(l->out, 1) < 0) || (l->err >= 0 && dup2(l->err, 2) < 0))
		_exit(126);
	place_fd(code_fd, CODE_FD);
	if (ctl_fd >= 0)
		place_fd(ctl_fd, PRELOAD_CTL_FD);
	for (int fd = ctl_fd >= 0 ? PRELOAD_CTL_FD + 1 : CODE_FD + 1; fd < 1024; fd++)
		close(fd);
	execvpe(l->argv[0], l->argv, l->envp);
	dprintf(2, "sandpit-runner: cannot run %s: %s\n", l->argv[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

/* Refuses the job when the sandbox has any interface but lo: its egress is none, so a network
 * there means the isolation it was promised does not exist (the runner never opens it up). */
static void refuse_open_network(void)
{
	char why[256];
	if (network_refusal(why, sizeof why) != 0)
		die_frame("%s", why);
}

/* The isolated program's init is a copy of the runner: the key and the job must not stay in it. */
static void scrub_job(void)
{
	explicit_bzero(channel_key, sizeof channel_key);
	explicit_bzero(job, job_len);
}

static void run_program(void *arg)
{
	exec_child(arg);
}

static struct spawned spawn(struct launch *l)
{
	if (l->isolate && under_gvisor()) {
		if (plain && (stdio_stash = stash_fds(STDIO, 2)) < 0)
			die_frame("cannot keep the pod log out of the program's reach under gVisor: %s", strerror(errno));
		char why[256];
		struct spawned s = spawn_isolated(run_program, l, scrub_job, 0, why, sizeof why);
		if (s.pid < 0)
			die_frame("%s", why);
		return s;
	}
	pid_t child = fork();
	if (child < 0)
		die_frame("fork: %s", strerror(errno));
	if (child == 0)
		exec_child(l);
	return (struct spawned){child, -1};
}

/* Adds NAME=VALUE unless the job set NAME itself: job variables come first in the array. */
static void default_env(char **env, int *n, const char *var)
{
	size_t k = (size_t)(strchr(var, '=') - var) + 1;
	for (int j = 0; j < *n; j++)
		if (strncmp(env[j], var, k) == 0)
			return;
	env[(*n)++] = (char *)var;
}

static char *BASE_ENV[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "TMPDIR=/tmp", "LANG=C.UTF-8",
			   "USER=sandbox", NULL};

static void set_base_env(void)
{
	for (size_t i = 0; BASE_ENV[i]; i++)
		default_env(job_env, &n_env, BASE_ENV[i]);
	for (size_t i = 0; egress_socket && EGRESS_ENV[i]; i++)
		default_env(job_env, &n_env, EGRESS_ENV[i]);
	for (int i = 0; i < n_inherited; i++)
		default_env(job_env, &n_env, inherited[i]);
	job_env[n_env] = NULL;
	job_args[n_args] = NULL;
}

/* A job with egress: the forwarder to the proxy's socket runs before the program does. */
static void start_egress(void)
{
	char why[256];
	if (egress_socket && egress_start(egress_socket, why, sizeof why) < 0)
		die_frame("%s", why);
}

/* The image's preloader (PRELOAD_DIR's one entry), when the command it stands in for is on PATH. */
static int find_preloader(void)
{
	DIR *d = opendir(PRELOAD_DIR);
	if (!d)
		return 0;
	struct dirent *e;
	while ((e = readdir(d)) && e->d_name[0] == '.') {
	}
	int found = 0;
	if (e) {
		snprintf(pre.name, sizeof pre.name, "%s", e->d_name);
		snprintf(pre.path, sizeof pre.path, "%s/%s", PRELOAD_DIR, e->d_name);
		static const char *dirs[] = {"/usr/local/bin", "/usr/bin", "/bin"}; /* BASE_ENV's PATH */
		char bin[PATH_MAX];
		for (size_t i = 0; i < sizeof dirs / sizeof *dirs && !found; i++) {
			snprintf(bin, sizeof bin, "%s/%s", dirs[i], pre.name);
			found = access(bin, X_OK) == 0;
		}
	}
	closedir(d);
	return found;
}

/* --preload: starts the preloader, if the image has one, before the job arrives. Best effort. */
static void preload_start(void)
{
	if (!find_preloader())
		return;
	int code = memfd_create("code", MFD_ALLOW_SEALING), in = memfd_create("stdin", MFD_ALLOW_SEALING);
	int out[2] = {-1, -1}, err[2] = {-1, -1}, ctl[2] = {-1, -1};
	if (code < 0 || in < 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 ||
	    pipe2(ctl, O_CLOEXEC) != 0) {
		int opened[] = {code, in, out[0], out[1], err[0], err[1], ctl[0], ctl[1]};
		for (size_t i = 0; i < sizeof opened / sizeof *opened; i++)
			if (opened[i] >= 0)
				close(opened[i]);
		return;
	}
	static char *argv[3];
	argv[0] = pre.name;
	argv[1] = pre.path;
	/* The environment set_base_env() gives a job with the --env variables. */
	int n = n_preload_env;
	for (size_t i = 0; BASE_ENV[i]; i++)
		default_env(preload_env, &n, BASE_ENV[i]);
	preload_env[n] = NULL;
	/* Under gVisor it is isolated, as every keyed job's program is (a job it serves is keyed). */
	struct launch l = {out[1], err[1], code, in, ctl[0], argv, preload_env, 1};
	pre.child = spawn(&l);
	setpgid(pre.child.pid, pre.child.pid);
	close(out[1]);
	close(err[1]);
	close(ctl[0]);
	pre.code_fd = code;
	pre.in_fd = in;
	pre.ctl_fd = ctl[1];
	pre.out_fd = out[0];
	pre.err_fd = err[0];
}

/* Whether the preloaded process can run this job as its own command would (read before set_base_env). */
static int preload_serves(void)
{
	if (pre.child.pid <= 0 || !keyed || !code_data || n_args != 2 || strcmp(job_args[0], pre.name) != 0 ||
	    job_args[1][0] != '/' || n_env != n_preload_env || n_inherited > 0 || egress_socket)
		return 0;
	for (int i = 0; i < n_env; i++)
		if (strcmp(job_env[i], preload_env[i]) != 0)
			return 0;
	return waitpid(pre.child.pid, NULL, WNOHANG) == 0;
}

/* Kills and reaps a preloaded process still waiting for its job: 1 once it is gone (or there was none). */
static int preload_kill(void)
{
	if (pre.child.pid <= 0)
		return 1;
	program_group = pre.child.pid;
	pre.child.pid = 0;
	int gone = program_gone();
	program_group = 0;
	return gone;
}

/* Ends a preloaded process that will serve no job, and gives back what it held. */
static void preload_stop(void)
{
	if (pre.child.pid <= 0)
		return;
	if (!preload_kill())
		die_frame("the preloaded %s did not stop", pre.name);
	if (release_stdio() != 0)
		die_frame("the preloaded %s did not stop", pre.name);
	int held[] = {pre.code_fd, pre.in_fd, pre.ctl_fd, pre.out_fd, pre.err_fd, pre.child.status_fd};
	for (size_t i = 0; i < sizeof held / sizeof *held; i++)
		if (held[i] >= 0)
			close(held[i]);
}

/*
 * Gives the preloaded process its job: the code and stdin in its memfds, sealed, then on its
 * control pipe, NUL-terminated: the script, the working directory, "1" or "0" (stdin, else
 * /dev/null), RLIMIT_FSIZE and RLIMIT_NOFILE (0: as they are). Returns it as the program's process.
 */
static struct spawned preload_go(void)
{
	seal_memfd(pre.code_fd, "code", code_data, code_len);
	if (have_stdin)
		seal_memfd(pre.in_fd, "stdin", stdin_data, stdin_len);
	char msg[PATH_MAX + 4096 + 64];
	int n = snprintf(msg, sizeof msg, "%s%c%s%c%d%c%llu%c%u%c", job_args[1], 0, workdir, 0, have_stdin, 0,
			 file_size, 0, open_files, 0);
	if (n < 0 || (size_t)n >= sizeof msg)
		die_frame("the job's script or working directory is too long");
	/* A preloader that died before it read this ends as a program that failed would. */
	for (const char *p = msg; n > 0;) {
		ssize_t w = write(pre.ctl_fd, p, (size_t)n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			break;
		p += w;
		n -= (int)w;
	}
	close(pre.ctl_fd);
	close(pre.code_fd);
	close(pre.in_fd);
	struct spawned s = pre.child;
	pre.child.pid = 0;
	return s;
}

/* What the supervision loop keeps track of. */
struct run {
	struct spawned child;
	struct stream streams[2];
	int status, exited, timed_out, open_streams;
	int watch_stdin; /* its end means the owner is gone */
	long long started, deadline, ended;
};

static void read_stream(struct run *r, int i)
{
	static char buf[65536];
	struct stream *s = &r->streams[i];
	ssize_t n = read(s->fd, buf, sizeof buf);
	if (n > 0) {
		forward(s, buf, (size_t)n);
	} else if (n == 0 || errno != EINTR) {
		close(s->fd);
		s->fd = -1;
		r->open_streams--;
	}
}

static void reap(struct run *r, int sfd)
{
	struct signalfd_siginfo si;
	while (read(sfd, &si, sizeof si) > 0) {
	}
	int st;
	pid_t p;
	while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
		if (p == r->child.pid && !r->exited) {
			r->status = program_status(r->child, st);
			r->exited = 1;
			kill_all(r->child.pid); /* leftovers would hold the pipes open */
		}
	}
}

/*
 * After the exit frame, until the owner hangs up (the end of stdin, or the engine's kill), at most
 * LINGER_MS: the container's end is work for the engine (its exit, its removal) that would share
 * the cores with the gateway's reply, so the gateway ends it once that reply is out. The program
 * is gone by now (supervise() returned once it was, and kill_all() took what it left).
 */
static void linger(void)
{
	char scratch[256];
	long long until = now_ms() + LINGER_MS;
	for (long long left; (left = until - now_ms()) > 0;) {
		struct pollfd p = {0, POLLIN, 0};
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
			return;
		ssize_t n = p.revents ? read(0, scratch, sizeof scratch) : 1;
		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
			return;
	}
}

/* Nothing more is sent after the job; the end of stdin means the gateway that attached is gone. */
static void check_owner(struct run *r)
{
	char scratch[256];
	ssize_t n = read(0, scratch, sizeof scratch);
	if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
		kill_all(r->child.pid);
		_exit(0);
	}
}

static void supervise(struct run *r, int sfd)
{
	while (!r->exited || r->open_streams > 0) {
		struct pollfd pfds[4] = {{sfd, POLLIN, 0},
					 {r->streams[0].fd, POLLIN, 0},
					 {r->streams[1].fd, POLLIN, 0},
					 {r->watch_stdin ? 0 : -1, POLLIN, 0}};
		int timeout = -1;
		if (r->deadline && !r->timed_out && !r->exited) {
			long long left = r->deadline - now_ms();
			timeout = left > 0 ? (int)left : 0;
		}
		if (poll(pfds, 4, timeout) < 0 && errno != EINTR)
			die_frame("poll: %s", strerror(errno));
		if (r->deadline && !r->timed_out && !r->exited && now_ms() >= r->deadline) {
			r->timed_out = 1;
			kill_all(r->child.pid);
		}
		for (int i = 0; i < 2; i++)
			if (r->streams[i].fd >= 0 && (pfds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
				read_stream(r, i);
		if (pfds[0].revents & POLLIN)
			reap(r, sfd);
		if (pfds[3].revents & (POLLIN | POLLHUP | POLLERR))
			check_owner(r);
	}
}

/* Plain mode: after the head that went out live, a line saying what was left out, then the tail. */
static void write_plain_tail(struct stream *s, int fd)
{
	unsigned long long shown = s->total - s->tail.len;
	unsigned long long forwarded = out_head < shown ? out_head : shown;
	if (shown > forwarded)
		dprintf(fd, "\n[sandpit: %llu bytes not shown]\n", shown - forwarded);
	char *out = s->tail.len ? malloc(s->tail.len) : NULL;
	if (!out)
		return;
	for (size_t i = 0; i < s->tail.len; i++)
		out[i] = s->tail.buf[(s->tail.start + i) % s->tail.cap];
	write_all(fd, out, s->tail.len);
	free(out);
}

/* writev() until every byte is written (the iovecs are consumed). */
static void writev_all(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		ssize_t w = writev(fd, iov, n < IOV_MAX ? n : IOV_MAX);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			_exit(111); /* our reader is gone: nothing left to report to */
		}
		for (; n > 0 && (size_t)w >= iov->iov_len; iov++, n--)
			w -= (ssize_t)iov->iov_len;
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
}

/* Protocol 5: a collected file is 'P' u32be size + path, then its bytes in 'D' frames of up to
   FILE_RECORD_DATA bytes (written only once no process of the program is left), all in one
   writev(): what carries our stdout (the engine's shim, then the engine) is woken once for the
   file, not once per frame (a 100 KB file reached the gateway in 1.8 ms instead of 2.7 to 3.5). */
static void frame_file(const char *path, const char *data, size_t len)
{
	size_t plen = strlen(path);
	if (plen > 1024)
		return; /* outputs.c returns no such path */
	size_t frames = (len + FILE_RECORD_DATA - 1) / FILE_RECORD_DATA;
	unsigned char *heads = malloc(RECORD_HEAD + 4 + plen + frames * RECORD_HEAD);
	struct iovec *iov = malloc((1 + 2 * frames) * sizeof *iov);
	if (!heads || !iov)
		die_frame("out of memory framing a collected file");
	unsigned char *p = heads;
	record_head(p, 'P', 4 + plen);
	p[RECORD_HEAD] = (unsigned char)(len >> 24);
	p[RECORD_HEAD + 1] = (unsigned char)(len >> 16);
	p[RECORD_HEAD + 2] = (unsigned char)(len >> 8);
	p[RECORD_HEAD + 3] = (unsigned char)len;
	memcpy(p + RECORD_HEAD + 4, path, plen);
	int n = 0;
	iov[n++] = (struct iovec){p, RECORD_HEAD + 4 + plen};
	p += RECORD_HEAD + 4 + plen;
	for (size_t off = 0; off < len; off += FILE_RECORD_DATA, p += RECORD_HEAD) {
		size_t k = len - off < FILE_RECORD_DATA ? len - off : FILE_RECORD_DATA;
		record_head(p, 'D', k);
		iov[n++] = (struct iovec){p, RECORD_HEAD};
		iov[n++] = (struct iovec){(void *)(data + off), k};
	}
	writev_all(1, iov, n);
	free(iov);
	free(heads);
}

/* ... and an entry or a file not collected: 'S' u8 reason, u16be entry length, entry, message (one record). */
static void frame_skip(enum skip_reason reason, const char *entry, const char *message)
{
	unsigned char rec[RECORD_DATA];
	size_t elen = strlen(entry), mlen = strlen(message);
	if (elen > 1024)
		elen = 1024;
	if (3 + elen + mlen > sizeof rec)
		mlen = sizeof rec - 3 - elen;
	rec[0] = (unsigned char)reason;
	rec[1] = (unsigned char)(elen >> 8);
	rec[2] = (unsigned char)elen;
	memcpy(rec + 3, entry, elen);
	memcpy(rec + 3 + elen, message, mlen);
	frame('S', rec, 3 + elen + mlen);
}

/* Kills and reaps what is left of the program; 1 once no process but ours is, 0 if one outlives 0.5 s. */
static int program_gone(void)
{
	for (int i = 0; i < 50; i++) {
		kill_all(program_group);
		while (waitpid(-1, NULL, WNOHANG) > 0) {
		}
		if (others_alive() == 0)
			return 1;
		usleep(10000);
	}
	return 0;
}

/* Collects the job's outputs (outputs.c) once nothing of the program can change the workspace. */
static void collect(void)
{
	static const struct output_sink framed = {frame_file, frame_skip};
	if (!program_gone()) {
		for (int i = 0; i < n_outputs; i++)
			frame_skip(SKIP_UNREADABLE, outputs[i], "a process of the program outlived it: nothing is collected");
		return;
	}
	fcntl(1, F_SETPIPE_SZ, FILES_PIPE_BYTES);
	collect_outputs(outputs, n_outputs, output_caps, &framed);
}

/*
 * --plain and --pool (protocol 5): the collected files go into the pod log, after the program's
 * output and before a pool pod's trailer, as one block of text lines (src/runner/files-block.ts):
 * "\n" RS "sandpit-files", then per file RS "F <size> <base64 path>" and its bytes in base64, 76
 * characters a line, per skip RS "S <reason> <base64 entry> <base64 message>", then RS "sandpit-files-end".
 */
static char log_buf[65536];
static size_t log_len;

static void log_flush(void)
{
	write_all(1, log_buf, log_len);
	log_len = 0;
}

static void log_put(const char *p, size_t n)
{
	while (n > 0) {
		size_t k = n < sizeof log_buf - log_len ? n : sizeof log_buf - log_len;
		memcpy(log_buf + log_len, p, k);
		log_len += k;
		p += k;
		n -= k;
		if (log_len == sizeof log_buf)
			log_flush();
	}
}

/* Base64; `wrap`: in lines of 76 characters, the last one ended too. */
static void log_base64(const unsigned char *p, size_t n, int wrap)
{
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t col = 0;
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
		char q[4] = {abc[v >> 18 & 63], abc[v >> 12 & 63], i + 1 < n ? abc[v >> 6 & 63] : '=',
			     i + 2 < n ? abc[v & 63] : '='};
		log_put(q, 4);
		col += 4;
		if (wrap && col == 76 && i + 3 < n) {
			log_put("\n", 1);
			col = 0;
		}
	}
	if (wrap && n)
		log_put("\n", 1);
}

static void log_file(const char *path, const char *data, size_t len)
{
	char head[64];
	int n = snprintf(head, sizeof head, "\x1e" "F %zu ", len);
	log_put(head, (size_t)n);
	log_base64((const unsigned char *)path, strlen(path), 0);
	log_put("\n", 1);
	log_base64((const unsigned char *)data, len, 1);
}

static void log_skip(enum skip_reason reason, const char *entry, const char *message)
{
	char head[16];
	int n = snprintf(head, sizeof head, "\x1e" "S %d ", (int)reason);
	log_put(head, (size_t)n);
	log_base64((const unsigned char *)entry, strlen(entry), 0);
	log_put(" ", 1);
	log_base64((const unsigned char *)message, strlen(message), 0);
	log_put("\n", 1);
}

/* Collects the job's outputs into the pod log (plain and pool modes), once nothing of the program is left. */
static void collect_into_log(void)
{
	static const struct output_sink logged = {log_file, log_skip};
	static const char start[] = "\n\x1e" "sandpit-files\n", end[] = "\x1e" "sandpit-files-end\n";
	log_put(start, sizeof start - 1);
	if (program_gone())
		collect_outputs(outputs, n_outputs, output_caps, &logged);
	else
		for (int i = 0; i < n_outputs; i++)
			log_skip(SKIP_UNREADABLE, outputs[i], "a process of the program outlived it: nothing is collected");
	log_put(end, sizeof end - 1);
	log_flush();
}

/* --pool: the exit trailer, the last write on stdout (src/runner/exit-trailer.ts). */
static void write_trailer(const char *json, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	char line[RECORD_MAX];
	size_t n = 0;
	memcpy(line, "\n\x1esandpit-exit ", 15);
	n = 15;
	for (int i = 0; i < KEY_LEN; i++) {
		line[n++] = hex[channel_key[i] >> 4];
		line[n++] = hex[channel_key[i] & 15];
	}
	line[n++] = ' ';
	if (len > sizeof line - n - 1)
		len = sizeof line - n - 1;
	memcpy(line + n, json, len);
	n += len;
	line[n++] = '\n';
	write_all(1, line, n); /* one write of at most PIPE_BUF bytes: a pipe keeps it whole */
}

static int report(struct run *r, long long oom_before)
{
	long long oom_after = oom_kills();
	int oom = oom_before >= 0 && oom_after > oom_before;
	int sig = WIFSIGNALED(r->status) ? WTERMSIG(r->status) : 0;
	int code = WIFEXITED(r->status) ? WEXITSTATUS(r->status) : 128 + sig;
	if (plain) {
		if (release_stdio() != 0)
			die_frame("a process of the program outlived it: its output is not shown");
		write_plain_tail(&r->streams[0], 1);
		write_plain_tail(&r->streams[1], 2);
		if (n_outputs)
			collect_into_log();
	} else {
		send_tail(&r->streams[0]);
		send_tail(&r->streams[1]);
	}
	char result[512];
	int n = snprintf(result, sizeof result,
			 "{\"exitCode\":%d,\"signal\":%d,\"timedOut\":%s,\"oomKilled\":%s,\"stdoutBytes\":%llu,"
			 "\"stderrBytes\":%llu,\"durationMs\":%lld}",
			 code, sig, r->timed_out ? "true" : "false", oom ? "true" : "false", r->streams[0].total,
			 r->streams[1].total, r->ended - r->started);
	if (plain) {
		write_termination_log(result, (size_t)n);
		if (r->timed_out)
			dprintf(2, "sandpit-runner: deadline of %u ms exceeded\n", deadline_ms);
		if (pool)
			write_trailer(result, (size_t)n);
		return code;
	}
	frame('X', result, (size_t)n);
	return 0;
}

int main(int argc, char **argv)
{
	const char *job_file = NULL;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--session") == 0)
			return session_main(argc, argv);
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--plain") == 0)
			plain = 1;
		else if (strcmp(argv[i], "--pool") == 0)
			plain = pool = 1;
		else if (strcmp(argv[i], "--preload") == 0)
			preload = 1;
		else if (strcmp(argv[i], "--env") == 0 && i + 1 < argc && strchr(argv[i + 1], '=') &&
			 n_preload_env < MAX_ENV)
			preload_env[n_preload_env++] = argv[++i];
		else if (strcmp(argv[i], "--job") == 0 && i + 1 < argc)
			job_file = argv[++i];
		else {
			fprintf(stderr, "usage: sandpit-runner [--job FILE] [--plain] | [--pool] --preload [--env NAME=VALUE]... | --pool | --session [--open-within SECONDS]\n");
			return 2;
		}
	}
	if (pool && job_file) {
		fprintf(stderr, "sandpit-runner: --pool reads its job from stdin, not --job\n");
		return 2;
	}
	if ((preload && job_file) || (n_preload_env && !preload)) {
		fprintf(stderr, "sandpit-runner: --preload (and its --env) is for a runner that waits for its job on stdin\n");
		return 2;
	}
	prctl(PR_SET_DUMPABLE, 0);
	signal(SIGPIPE, SIG_IGN);
	const unsigned char version[4] = {PROTOCOL_VERSION >> 24, PROTOCOL_VERSION >> 16 & 0xff,
					  PROTOCOL_VERSION >> 8 & 0xff, PROTOCOL_VERSION & 0xff};
	frame('R', version, sizeof version);

	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	if (preload)
		preload_start();

	int job_fd = 0;
	if (job_file && (job_fd = open(job_file, O_RDONLY | O_CLOEXEC)) < 0)
		die_frame("cannot open job %s: %s", job_file, strerror(errno));
	job = read_job(job_fd, &job_len);
	if (job_fd > 0)
		close(job_fd);
	struct run r = {.started = now_ms()};
	parse_job(job, job_len, 0);
	int preloaded = preload_serves();
	if (!preloaded)
		preload_stop();
	if (chdir(workdir) != 0)
		die_frame("cannot enter %s: %s", workdir, strerror(errno));
	parse_job(job, job_len, 1); /* second pass writes the files, now relative to the workdir */
	set_base_env();
	long long oom_before = oom_kills();

	int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
	if (no_network)
		refuse_open_network();
	start_egress();
	if (preloaded) {
		out_pipe[0] = pre.out_fd;
		err_pipe[0] = pre.err_fd;
		r.child = preload_go();
	} else {
		int code_fd = code_data ? sealed_memfd("code", code_data, code_len) : -1;
		int in_fd = have_stdin ? sealed_memfd("stdin", stdin_data, stdin_len) : open("/dev/null", O_RDONLY);
		if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0)
			die_frame("pipe: %s", strerror(errno));
		/* Protocol 2's frames carry no key, so isolating its child would protect nothing (unless plain). */
		struct launch l = {out_pipe[1], err_pipe[1], code_fd, in_fd, -1, job_args, job_env, keyed || plain};
		r.child = spawn(&l);
		setpgid(r.child.pid, r.child.pid);
		close(out_pipe[1]);
		close(err_pipe[1]);
	}
	program_group = r.child.pid;

	r.streams[0] = (struct stream){out_pipe[0], 'O', 0, out_head, {0}};
	r.streams[1] = (struct stream){err_pipe[0], 'E', 0, out_head, {0}};
	for (int i = 0; i < 2; i++) {
		r.streams[i].tail.cap = out_tail;
		r.streams[i].tail.buf = out_tail ? malloc(out_tail) : NULL;
	}
	r.open_streams = 2;
	r.watch_stdin = !plain && job_fd == 0;
	r.deadline = deadline_ms ? r.started + deadline_ms : 0;
	supervise(&r, sfd);
	r.ended = now_ms();
	egress_stop();
	if (n_outputs && !plain)
		collect();
	int status = report(&r, oom_before);
	if (r.watch_stdin)
		linger();
	return status;
}
