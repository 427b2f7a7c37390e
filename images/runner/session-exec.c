/*
 * The execs of a session: each in its own process group (a tty exec: its own session), killed by
 * its deadline; its output capped like a run's (the head live, the tail kept, exact counts); its
 * exit report kept until the gateway acknowledges it, and after that in the session's exec history
 * (its last RETAINED_TAIL bytes of each stream, HISTORY_BYTES for all of them), which any gateway
 * that attaches later reads back ('I'). Processes that leave the group (setsid, a daemon's double
 * fork) live on until the session ends.
 */
#include "session.h"
#include "egress.h"
#include "program.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#define MAX_ARGS 4096
#define MAX_EXEC_ENV 1024
#define ARGV_PREVIEW 2048

struct stream {
	int fd;
	char id; /* 'O' or 'E' */
	unsigned long long total;
	size_t head_left;
	struct ring tail;   /* what follows the head, up to the tail window: the report's tail */
	struct ring recent; /* the last RETAINED_TAIL bytes of everything: what a new gateway gets */
};

struct exec {
	int used;
	uint32_t id;
	char name[129];
	char *argv_json;
	int background, tty;
	pid_t pid;    /* what the runner waits for: the leader, or its init under gVisor */
	pid_t group;  /* the leader's pid (and process group) as the runner sees it */
	int status_fd; /* under gVisor: where the init reports the leader's wait status; else -1 */
	int running;  /* the leader has not been reaped */
	int draining; /* reaped: what is left in the pipes is being read */
	int finished; /* reported; kept until acknowledged */
	int acked;    /* acknowledged: kept in the history, `recent` trimmed to what it holds */
	int resynced; /* running when a new gateway attached: it gets `recent` as the tail */
	int status, timed_out, killed;
	struct stream s[2];
	int in_fd; /* streamed stdin: the pipe (or the pty master); -1 when none */
	char *in_buf;
	size_t in_len, in_off;
	int in_eof;
	long long started, deadline, finished_at, oom_before;
	size_t head_win, tail_win; /* the output window the exec asked for, per stream */
	char report[512];
};

static struct exec execs[MAX_EXECS_CAP + MAX_RETAINED];
#define N_EXECS ((int)(sizeof execs / sizeof *execs))
static uint32_t last_id;

uint32_t exec_last_id(void)
{
	return last_id;
}

static void send_ring(uint32_t id, struct stream *s, struct ring *r)
{
	char piece[REC_DATA];
	piece[0] = s->id == 'O' ? 1 : 2;
	for (size_t off = 0; off < r->len;) {
		size_t n = r->len - off < REC_DATA - 1 ? r->len - off : REC_DATA - 1;
		for (size_t i = 0; i < n; i++)
			piece[1 + i] = r->buf[(r->start + off + i) % r->cap];
		send_data('T', id, piece, n + 1);
		off += n;
	}
}

static struct exec *find(uint32_t id)
{
	for (int i = 0; i < N_EXECS; i++)
		if (execs[i].used && execs[i].id == id)
			return &execs[i];
	return NULL;
}

int exec_running(void)
{
	for (int i = 0; i < N_EXECS; i++)
		if (execs[i].used && (execs[i].running || execs[i].draining))
			return 1;
	return 0;
}

static int count_running(void)
{
	int n = 0;
	for (int i = 0; i < N_EXECS; i++)
		n += execs[i].used && !execs[i].finished;
	return n;
}

int exec_is_group(pid_t pgid)
{
	for (int i = 0; i < N_EXECS; i++)
		if (execs[i].used && (execs[i].running || execs[i].draining) && execs[i].group == pgid)
			return 1;
	return 0;
}

static void free_exec(struct exec *e)
{
	for (int i = 0; i < 2; i++) {
		if (e->s[i].fd >= 0)
			close(e->s[i].fd);
		free(e->s[i].tail.buf);
		free(e->s[i].recent.buf);
	}
	if (e->in_fd >= 0 && e->in_fd != e->s[0].fd)
		close(e->in_fd);
	if (e->status_fd >= 0)
		close(e->status_fd);
	free(e->in_buf);
	free(e->argv_json);
	memset(e, 0, sizeof *e);
}

/* The finished exec that goes first: the oldest in the history, else the oldest unacknowledged. */
static struct exec *oldest_finished(int *count)
{
	struct exec *oldest = NULL;
	for (int i = 0; i < N_EXECS; i++) {
		struct exec *e = &execs[i];
		if (!e->used || !e->finished)
			continue;
		(*count)++;
		if (!oldest || e->acked > oldest->acked ||
		    (e->acked == oldest->acked && e->finished_at < oldest->finished_at))
			oldest = e;
	}
	return oldest;
}

static struct exec *new_slot(void)
{
	int retained = 0;
	struct exec *oldest = oldest_finished(&retained);
	/* Reports nobody acknowledges (no gateway) and the history must not pile up. */
	if (retained >= MAX_RETAINED && oldest)
		free_exec(oldest);
	for (int i = 0; i < N_EXECS; i++)
		if (!execs[i].used)
			return &execs[i];
	return NULL;
}

/* --- starting an exec --- */

struct spec {
	char *argv[MAX_ARGS + 1];
	int argc;
	const char *env[MAX_EXEC_ENV];
	size_t env_len[MAX_EXEC_ENV];
	int envc;
	const char *cwd, *stdin_data, *name;
	size_t cwd_len, stdin_len, name_len;
	int have_stdin, streamed, tty, background;
	uint16_t cols, rows;
	uint32_t deadline_ms, head, tail;
};

/* Parses an exec request; on failure it has sent the error reply. */
static int parse_spec(uint32_t id, const char *body, size_t len, struct spec *sp)
{
	size_t off = 0;
	struct rec r;
	int rc;
	sp->head = UINT32_MAX;
	while ((rc = next_rec(body, len, &off, &r)) > 0) {
		switch (r.tag) {
		case 'a':
			if (sp->argc >= MAX_ARGS || memchr(r.p, 0, r.len)) {
				send_error(id, "INVALID_REQUEST", "command", "an argument holds a NUL byte, or there are over %d", MAX_ARGS);
				return -1;
			}
			sp->argv[sp->argc++] = strndup(r.p, r.len);
			break;
		case 'e':
			if (sp->envc >= MAX_EXEC_ENV || memchr(r.p, 0, r.len) || !memchr(r.p, '=', r.len) || r.p[0] == '=') {
				send_error(id, "INVALID_REQUEST", "env", "bad environment variable");
				return -1;
			}
			sp->env[sp->envc] = r.p;
			sp->env_len[sp->envc++] = r.len;
			break;
		case 'c':
			sp->cwd = r.p;
			sp->cwd_len = r.len;
			break;
		case 't':
		case 'o':
		case 'y':
			if (r.len != (r.tag == 't' ? 4u : r.tag == 'o' ? 8u : 4u)) {
				send_error(id, "INVALID_REQUEST", NULL, "bad exec record '%c'", r.tag);
				return -1;
			}
			if (r.tag == 't')
				sp->deadline_ms = be32((const unsigned char *)r.p);
			else if (r.tag == 'o') {
				sp->head = be32((const unsigned char *)r.p);
				sp->tail = be32((const unsigned char *)r.p + 4);
			} else {
				sp->tty = 1;
				sp->cols = (uint16_t)((unsigned char)r.p[0] << 8 | (unsigned char)r.p[1]);
				sp->rows = (uint16_t)((unsigned char)r.p[2] << 8 | (unsigned char)r.p[3]);
			}
			break;
		case 'i':
			sp->stdin_data = r.p;
			sp->stdin_len = r.len;
			sp->have_stdin = 1;
			break;
		case 's':
			sp->streamed = 1;
			break;
		case 'b':
			sp->background = 1;
			break;
		case 'n':
			if (r.len > 128) {
				send_error(id, "INVALID_REQUEST", "execId", "an exec name over 128 bytes");
				return -1;
			}
			sp->name = r.p;
			sp->name_len = r.len;
			break;
		default:
			send_error(id, "INVALID_REQUEST", NULL, "unknown exec record 0x%02x", (unsigned char)r.tag);
			return -1;
		}
	}
	if (rc < 0 || sp->argc == 0) {
		send_error(id, "INVALID_REQUEST", "command", rc < 0 ? "malformed exec request" : "no command");
		return -1;
	}
	if (sp->tail > (64u << 20) || (sp->head != UINT32_MAX && sp->head > (64u << 20))) {
		send_error(id, "INVALID_REQUEST", "outputBytes", "output window over 64 MiB");
		return -1;
	}
	return 0;
}

static size_t name_len(const char *nv, size_t n)
{
	const char *eq = memchr(nv, '=', n);
	return eq ? (size_t)(eq - nv) : n;
}

static int env_has(char **envp, int n, const char *nv, size_t len)
{
	size_t k = name_len(nv, len);
	for (int i = 0; i < n; i++)
		if (strncmp(envp[i], nv, k) == 0 && envp[i][k] == '=')
			return 1;
	return 0;
}

/* The exec's variables, then the session's, then the base ones: each name once. The first *owned are copies. */
static char **build_env(struct spec *sp, int *owned)
{
	static const char *base[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "TMPDIR=/tmp", "LANG=C.UTF-8",
				     "USER=sandbox"};
	int cap = sp->envc + n_session_env + 6, n = 0;
	char **envp = calloc((size_t)cap, sizeof *envp);
	if (!envp)
		return NULL;
	for (int i = 0; i < sp->envc; i++)
		if (!env_has(envp, n, sp->env[i], sp->env_len[i]) && (envp[n] = strndup(sp->env[i], sp->env_len[i])))
			n++;
	*owned = n;
	for (int i = 0; i < n_session_env; i++)
		if (!env_has(envp, n, session_env[i], strlen(session_env[i])))
			envp[n++] = session_env[i];
	for (size_t i = 0; i < sizeof base / sizeof *base; i++)
		if (!env_has(envp, n, base[i], strlen(base[i])))
			envp[n++] = (char *)base[i];
	envp[n] = NULL;
	return envp;
}

static int sealed_memfd(const char *data, size_t len)
{
	int fd = memfd_create("stdin", MFD_ALLOW_SEALING | MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fd, data + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			close(fd);
			return -1;
		}
		off += (size_t)w;
	}
	fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

static void close_from(int lowest)
{
	if (syscall(SYS_close_range, (unsigned)lowest, ~0u, 0) == 0)
		return;
	struct rlimit rl;
	long max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 1u << 20 ? (long)rl.rlim_cur : 65536;
	for (long fd = lowest; fd < max; fd++)
		close((int)fd);
}

/* The child, between fork and exec: its own group, the kernel's first OOM victim, then the program. */
static void child(struct spec *sp, char **envp, int cwd_fd, int in_fd, int out_fd, int err_fd, const char *pts)
{
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	signal(SIGXFSZ, SIG_DFL);
	if (pts) {
		setsid();
		int t = open(pts, O_RDWR);
		if (t < 0)
			_exit(126);
		ioctl(t, TIOCSCTTY, 0); /* opening it as a session leader made it ours already, on Linux */
		in_fd = out_fd = err_fd = t;
	} else {
		setpgid(0, 0);
	}
	if (program_limits(session_file_size, session_open_files) != 0)
		_exit(126);
	int adj = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (adj >= 0) {
		if (write(adj, "1000", 4) < 0) {
		}
		close(adj);
	}
	if (fchdir(cwd_fd) != 0)
		_exit(126);
	if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
		_exit(126);
	close_from(3);
	execvpe(sp->argv[0], sp->argv, envp);
	dprintf(2, "sandpit-runner: cannot run %s: %s\n", sp->argv[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

/* What the exec's process is started with. */
struct launch {
	struct spec *sp;
	char **envp;
	int cwd_fd, stdio[3];
	const char *pts;
	int go_fd, go_w; /* isolated: the program waits for this pipe's end before it starts */
	pid_t group; /* out: the leader's pid as the runner sees it */
};

static void run_isolated(void *arg)
{
	struct launch *l = arg;
	char c;
	close(l->go_w);
	while (read(l->go_fd, &c, 1) < 0 && errno == EINTR) {
	}
	close(l->go_fd);
	child(l->sp, l->envp, l->cwd_fd, l->stdio[0], l->stdio[1], l->stdio[2], l->pts);
}

/* pid's parent, from /proc/pid/stat; -1 when it is gone. */
static pid_t parent_of(pid_t pid)
{
	char path[64], stat[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, stat, sizeof stat - 1);
	close(fd);
	if (n <= 0)
		return -1;
	stat[n] = 0;
	char *rp = strrchr(stat, ')');
	char state;
	int ppid;
	return rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 ? (pid_t)ppid : -1;
}

/* The one child of an isolated exec's init: its program, still waiting to start, so nothing else yet. */
static pid_t child_of(pid_t init)
{
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	pid_t found = 0;
	struct dirent *de;
	while ((de = readdir(d)) && !found) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (!*end && pid > 0 && parent_of((pid_t)pid) == init)
			found = (pid_t)pid;
	}
	closedir(d);
	return found;
}

/*
 * Starts the exec's process. Under gVisor it runs below its own init (program.h); the runner
 * learns its pid before it starts, so that its deadline can kill its group, and only its group.
 */
static struct spawned launch(struct launch *l, char *why, size_t why_len)
{
	if (!under_gvisor()) {
		pid_t pid = fork();
		if (pid == 0)
			child(l->sp, l->envp, l->cwd_fd, l->stdio[0], l->stdio[1], l->stdio[2], l->pts);
		l->group = pid;
		return (struct spawned){pid, -1};
	}
	int go[2];
	if (pipe2(go, O_CLOEXEC) != 0)
		return (struct spawned){-1, -1};
	l->go_fd = go[0];
	l->go_w = go[1];
	struct spawned s = spawn_isolated(run_isolated, l, session_scrub, 1, why, why_len);
	close(go[0]);
	if (s.pid > 0)
		l->group = child_of(s.pid);
	close(go[1]);
	if (s.pid > 0 && l->group <= 0) {
		snprintf(why, why_len, "cannot find the exec's process below its init");
		kill(s.pid, SIGKILL);
		waitpid(s.pid, NULL, 0);
		close(s.status_fd);
		return (struct spawned){-1, -1};
	}
	return s;
}

static char *argv_json(struct spec *sp)
{
	struct jbuf b = {0};
	jb_lit(&b, "[");
	for (int i = 0; i < sp->argc && b.len < ARGV_PREVIEW; i++) {
		if (i)
			jb_lit(&b, ",");
		size_t n = strlen(sp->argv[i]);
		jb_str(&b, sp->argv[i], n > 256 ? 256 : n);
	}
	jb_lit(&b, "]");
	return b.failed ? strdup("[]") : b.p;
}

static int open_cwd(uint32_t id, struct spec *sp)
{
	if (!sp->cwd || sp->cwd_len == 0)
		return fcntl(ws_fd, F_DUPFD_CLOEXEC, 0);
	if (!check_path(id, "cwd", sp->cwd, sp->cwd_len))
		return -1;
	struct resolved r;
	if (!resolve_path(id, "cwd", sp->cwd, sp->cwd_len, FOLLOW_LAST, &r))
		return -1;
	int fd = r.name[0] ? openat(r.dirfd, r.name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
			   : fcntl(r.dirfd, F_DUPFD_CLOEXEC, 0);
	int err = errno;
	close(r.dirfd);
	if (fd < 0) {
		send_error(id, err == ENOENT ? "NOT_FOUND" : "INVALID_REQUEST", "cwd", "%s: %s", r.rel,
			   err == ENOTDIR || err == ELOOP ? "not a directory" : strerror(err));
		return -1;
	}
	return fd;
}

/* The pipes (or the pty) of a new exec: fds[0..2] the child's ends, fds[3..5] ours (stdin, out, err). */
static int make_stdio(uint32_t id, struct spec *sp, int fds[6], char *pts, size_t pts_len)
{
	for (int i = 0; i < 6; i++)
		fds[i] = -1;
	if (sp->tty) {
		int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (m < 0 || grantpt(m) != 0 || unlockpt(m) != 0 || ptsname_r(m, pts, pts_len) != 0) {
			send_error(id, "INTERNAL", "tty", "cannot open a pseudo-terminal: %s", strerror(errno));
			if (m >= 0)
				close(m);
			return -1;
		}
		struct winsize ws = {sp->rows ? sp->rows : 24, sp->cols ? sp->cols : 80, 0, 0};
		ioctl(m, TIOCSWINSZ, &ws);
		fcntl(m, F_SETFL, fcntl(m, F_GETFL) | O_NONBLOCK);
		fds[3] = fds[4] = m;
		return 0;
	}
	int out[2], err[2];
	if (pipe2(out, O_CLOEXEC) != 0)
		goto fail;
	if (pipe2(err, O_CLOEXEC) != 0) {
		close(out[0]);
		close(out[1]);
		goto fail;
	}
	fds[1] = out[1];
	fds[2] = err[1];
	fds[4] = out[0];
	fds[5] = err[0];
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	fcntl(err[0], F_SETFL, O_NONBLOCK);
	if (sp->have_stdin && !sp->streamed) {
		fds[0] = sealed_memfd(sp->stdin_data, sp->stdin_len);
	} else if (sp->streamed || sp->have_stdin) {
		int in[2];
		if (pipe2(in, O_CLOEXEC) == 0) {
			fds[0] = in[0];
			fds[3] = in[1];
			fcntl(in[1], F_SETFL, O_NONBLOCK);
		}
	} else {
		fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	if (fds[0] >= 0)
		return 0;
fail:
	send_error(id, "INTERNAL", NULL, "cannot set up the exec's pipes: %s", strerror(errno));
	for (int i = 0; i < 6; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return -1;
}

static void free_spec(struct spec *sp)
{
	for (int i = 0; i < sp->argc; i++)
		free(sp->argv[i]);
}

static void init_stream(struct stream *s, int fd, char id, struct spec *sp)
{
	s->fd = fd;
	s->id = id;
	s->head_left = sp->head;
	s->tail.cap = sp->tail;
	s->tail.buf = sp->tail ? malloc(sp->tail) : NULL;
	if (sp->tail && !s->tail.buf)
		s->tail.cap = 0;
	s->recent.buf = malloc(RETAINED_TAIL);
	s->recent.cap = s->recent.buf ? RETAINED_TAIL : 0;
}

void exec_start(uint32_t id, const char *body, size_t len)
{
	static struct spec sp;
	memset(&sp, 0, sizeof sp);
	struct exec *same = find(id);
	/* A gateway before protocol 5 does not know the history's ids: the old record gives way. */
	if (same && same->acked)
		free_exec(same);
	else if (same)
		return send_error(id, "INVALID_REQUEST", NULL, "exec id %u is in use", id);
	if (parse_spec(id, body, len, &sp) != 0)
		return free_spec(&sp);
	if (count_running() >= max_execs) {
		send_error(id, "BUSY", NULL, "%d execs run already: the session allows %d at once", count_running(), max_execs);
		return free_spec(&sp);
	}
	struct exec *e = new_slot();
	int cwd_fd = e ? open_cwd(id, &sp) : -1;
	if (!e)
		send_error(id, "BUSY", NULL, "no room for another exec");
	char pts[128] = "";
	int fds[6];
	int owned = 0;
	char **envp = cwd_fd >= 0 ? build_env(&sp, &owned) : NULL;
	if (cwd_fd < 0 || !envp || make_stdio(id, &sp, fds, pts, sizeof pts) != 0) {
		if (cwd_fd >= 0 && !envp)
			send_error(id, "INTERNAL", NULL, "out of memory");
		if (cwd_fd >= 0)
			close(cwd_fd);
		free(envp);
		return free_spec(&sp);
	}
	long long oom_before = oom_kills();
	sp.argv[sp.argc] = NULL;
	struct launch l = {&sp, envp, cwd_fd, {fds[0], fds[1], fds[2]}, sp.tty ? pts : NULL, -1, -1, 0};
	char why[256] = "";
	struct spawned s = launch(&l, why, sizeof why);
	pid_t pid = s.pid;
	int fork_err = errno;
	close(cwd_fd);
	for (int i = 0; i < 3; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	for (int i = 0; i < owned; i++)
		free(envp[i]); /* the exec's own copies come first; the rest are borrowed */
	free(envp);
	if (pid < 0) {
		if (why[0])
			send_error(id, "INTERNAL", NULL, "%s", why);
		else
			send_error(id, "BUSY", NULL, "cannot start a process: %s (the pids limit?)", strerror(fork_err));
		for (int i = 3; i < 6; i++)
			if (fds[i] >= 0 && (i != 4 || fds[4] != fds[3]))
				close(fds[i]);
		return free_spec(&sp);
	}
	if (!sp.tty && s.status_fd < 0)
		setpgid(pid, pid);
	memset(e, 0, sizeof *e);
	e->used = 1;
	e->id = id;
	if (id > last_id)
		last_id = id;
	e->group = l.group;
	e->status_fd = s.status_fd;
	memcpy(e->name, sp.name ? sp.name : "", sp.name_len);
	e->argv_json = argv_json(&sp);
	e->background = sp.background;
	e->tty = sp.tty;
	e->pid = pid;
	e->running = 1;
	e->in_fd = fds[3];
	init_stream(&e->s[0], fds[4], 'O', &sp);
	init_stream(&e->s[1], sp.tty ? -1 : fds[5], 'E', &sp);
	e->started = now_ms();
	e->deadline = sp.deadline_ms ? e->started + sp.deadline_ms : 0;
	e->head_win = sp.head;
	e->tail_win = sp.tail;
	e->oom_before = oom_before;
	if (sp.tty && sp.have_stdin && sp.stdin_len) {
		e->in_buf = malloc(sp.stdin_len);
		if (e->in_buf) {
			memcpy(e->in_buf, sp.stdin_data, sp.stdin_len);
			e->in_len = sp.stdin_len;
		}
	}
	if (!sp.tty && sp.have_stdin && sp.streamed && sp.stdin_len) {
		e->in_buf = malloc(sp.stdin_len);
		if (e->in_buf) {
			memcpy(e->in_buf, sp.stdin_data, sp.stdin_len);
			e->in_len = sp.stdin_len;
		}
	}
	free_spec(&sp);
	struct jbuf b = {0};
	jb_fmt(&b, "{\"pid\":%d}", (int)e->group);
	send_json('B', id, &b);
}

/* --- output and stdin --- */

static void forward(struct exec *e, struct stream *s, const char *p, size_t n)
{
	s->total += n;
	ring_push(&s->recent, p, n);
	size_t live = n < s->head_left ? n : s->head_left;
	if (live) {
		send_data(s->id, e->id, p, live);
		s->head_left -= live;
	}
	ring_push(&s->tail, p + live, n - live);
}

/* Reads what a stream holds now; returns 0 once it is closed (EOF, or EAGAIN when `final`). */
static int read_stream(struct exec *e, struct stream *s, int final)
{
	static char buf[65536];
	while (s->fd >= 0 && !outq_full()) {
		ssize_t n = read(s->fd, buf, sizeof buf);
		if (n > 0) {
			forward(e, s, buf, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN && !final)
			return 1;
		/* EOF, EIO (a pty whose other side is gone), or nothing left once the group is dead. */
		if (s->fd != e->in_fd)
			close(s->fd);
		s->fd = -1;
		return 0;
	}
	return s->fd >= 0;
}

static void write_stdin(struct exec *e)
{
	size_t before = e->in_off;
	while (e->in_fd >= 0 && e->in_off < e->in_len) {
		ssize_t w = write(e->in_fd, e->in_buf + e->in_off, e->in_len - e->in_off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			break;
		if (w < 0) { /* the program closed its stdin: what is left goes nowhere */
			e->in_off = e->in_len;
			break;
		}
		e->in_off += (size_t)w;
	}
	if (e->in_off > before) {
		struct jbuf b = {0};
		jb_fmt(&b, "{\"bytes\":%zu}", e->in_off - before);
		send_json('c', e->id, &b);
	}
	if (e->in_off == e->in_len) {
		e->in_off = e->in_len = 0;
		if (e->in_eof && e->in_fd >= 0) {
			if (e->tty) {
				if (write(e->in_fd, "\x04", 1) < 0) {
				}
			} else {
				close(e->in_fd);
			}
			if (!e->tty)
				e->in_fd = -1;
			e->in_eof = 0;
		}
	}
}

void exec_data(uint32_t id, const char *p, size_t n)
{
	struct exec *e = find(id);
	if (!e || e->finished || e->in_fd < 0 || n == 0)
		return; /* finished, or its stdin is not streamed: nothing to feed */
	if (e->in_len - e->in_off + n > 2 * STDIN_WINDOW) {
		dprintf(2, "sandpit-runner: exec %u: stdin sent past its window; dropped\n", id);
		return;
	}
	if (e->in_off > 0) {
		memmove(e->in_buf, e->in_buf + e->in_off, e->in_len - e->in_off);
		e->in_len -= e->in_off;
		e->in_off = 0;
	}
	char *b = realloc(e->in_buf, e->in_len + n);
	if (!b)
		return;
	memcpy(b + e->in_len, p, n);
	e->in_buf = b;
	e->in_len += n;
	write_stdin(e);
}

void exec_eof(uint32_t id)
{
	struct exec *e = find(id);
	if (!e || e->finished || e->in_fd < 0)
		return;
	e->in_eof = 1;
	write_stdin(e);
}

void exec_resize(uint32_t id, const char *body, size_t len)
{
	struct exec *e = find(id);
	size_t off = 0;
	struct rec r;
	if (!e || !e->tty || e->s[0].fd < 0)
		return;
	while (next_rec(body, len, &off, &r) > 0) {
		if (r.tag == 'g' && r.len == 4) {
			struct winsize ws = {(unsigned short)((unsigned char)r.p[2] << 8 | (unsigned char)r.p[3]),
					     (unsigned short)((unsigned char)r.p[0] << 8 | (unsigned char)r.p[1]), 0, 0};
			ioctl(e->s[0].fd, TIOCSWINSZ, &ws);
		}
	}
}

static void kill_group(struct exec *e)
{
	kill(-e->group, SIGKILL);
	kill(e->group, SIGKILL); /* in case it has not made its group yet */
}

void exec_kill(uint32_t id)
{
	struct exec *e = find(id);
	if (!e || !e->running)
		return;
	e->killed = 1;
	kill_group(e);
}

/* What an exec in the history holds: its kept output and argv. */
static size_t history_size(const struct exec *e)
{
	return e->s[0].recent.cap + e->s[1].recent.cap + (e->argv_json ? strlen(e->argv_json) : 0) + sizeof *e;
}

/* The ring's bytes in order, in a buffer of exactly their size (the ring then holds them from 0). */
static void trim_ring(struct ring *r)
{
	char *b = r->len ? malloc(r->len) : NULL;
	for (size_t i = 0; b && i < r->len; i++)
		b[i] = r->buf[(r->start + i) % r->cap];
	free(r->buf);
	*r = b ? (struct ring){b, r->len, r->len, 0} : (struct ring){0};
}

/* The gateway holds the exec's report: it moves to the history, whose oldest go past HISTORY_BYTES. */
void exec_ack(uint32_t id)
{
	struct exec *e = find(id);
	if (!e || !e->finished || e->acked)
		return;
	e->acked = 1;
	trim_ring(&e->s[0].recent);
	trim_ring(&e->s[1].recent);
	for (;;) {
		size_t bytes = 0;
		struct exec *oldest = NULL;
		for (int i = 0; i < N_EXECS; i++) {
			struct exec *h = &execs[i];
			if (!h->used || !h->acked)
				continue;
			bytes += history_size(h);
			if (!oldest || h->finished_at < oldest->finished_at)
				oldest = h;
		}
		/* The newest stays, even alone over the bound (it is at most 2 x RETAINED_TAIL). */
		if (bytes <= HISTORY_BYTES || oldest == e)
			return;
		free_exec(oldest);
	}
}

/* --- the end of an exec --- */

static void format_report(struct exec *e)
{
	int st = e->status;
	int sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
	int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + sig;
	long long after = oom_kills();
	/* Killed by SIGKILL (or a shell saying its child was: 137) while the cgroup's OOM kills rose. */
	int killed = sig == SIGKILL || code == 128 + SIGKILL;
	int oom = killed && !e->timed_out && !e->killed && e->oom_before >= 0 && after > e->oom_before;
	snprintf(e->report, sizeof e->report,
		 "{\"exitCode\":%d,\"signal\":%d,\"timedOut\":%s,\"oomKilled\":%s,\"killed\":%s,\"stdoutBytes\":%llu,"
		 "\"stderrBytes\":%llu,\"durationMs\":%lld}",
		 code, sig, e->timed_out ? "true" : "false", oom ? "true" : "false", e->killed ? "true" : "false",
		 e->s[0].total, e->s[1].total, e->finished_at - e->started);
}

static void finish(struct exec *e)
{
	e->draining = 0;
	e->finished = 1;
	e->finished_at = now_ms();
	format_report(e);
	for (int i = 0; i < 2; i++) {
		send_ring(e->id, &e->s[i], e->resynced ? &e->s[i].recent : &e->s[i].tail);
		free(e->s[i].tail.buf);
		e->s[i].tail = (struct ring){0};
	}
	send_msg('X', e->id, e->report, strlen(e->report));
	if (e->in_fd >= 0)
		close(e->in_fd);
	if (e->s[0].fd == e->in_fd)
		e->s[0].fd = -1;
	e->in_fd = -1;
	free(e->in_buf);
	e->in_buf = NULL;
	e->in_len = e->in_off = 0;
	note_activity();
}

/* After the leader exits, its group goes too (leftovers would hold the pipes open), and what is in the pipes is read. */
static void drain(struct exec *e)
{
	int open_streams = 0;
	for (int i = 0; i < 2; i++)
		open_streams += read_stream(e, &e->s[i], 1);
	if (!open_streams)
		finish(e);
}

void exec_pump(void)
{
	for (int i = 0; i < N_EXECS && !outq_full(); i++)
		if (execs[i].used && execs[i].draining)
			drain(&execs[i]);
}

/* The leader exited: its group goes too (leftovers would hold the pipes open), then its output is drained. */
static void leader_ended(struct exec *e, int status)
{
	e->running = 0;
	e->draining = 1;
	e->status = status;
	kill(-e->group, SIGKILL);
	if (e->status_fd >= 0) {
		close(e->status_fd);
		e->status_fd = -1;
	}
	drain(e);
}

void exec_on_sigchld(void)
{
	int st;
	pid_t p;
	while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
		for (int i = 0; i < N_EXECS; i++) {
			struct exec *e = &execs[i];
			if (e->used && e->running && e->pid == p) {
				leader_ended(e, program_status((struct spawned){e->pid, e->status_fd}, st));
				break;
			}
		}
	}
}

int exec_pollfds(struct pollfd *pfds, int max, void **owners)
{
	int n = 0;
	int room = !outq_full();
	for (int i = 0; i < N_EXECS && n + 4 <= max; i++) {
		struct exec *e = &execs[i];
		if (!e->used || !e->running)
			continue;
		int want_in = e->in_fd >= 0 && e->in_off < e->in_len;
		for (int k = 0; k < 2; k++) {
			if (e->s[k].fd < 0)
				continue;
			short ev = room ? POLLIN : 0;
			if (e->s[k].fd == e->in_fd && want_in)
				ev |= POLLOUT;
			if (!ev)
				continue;
			pfds[n] = (struct pollfd){e->s[k].fd, ev, 0};
			owners[n++] = e;
		}
		if (want_in && e->in_fd != e->s[0].fd) {
			pfds[n] = (struct pollfd){e->in_fd, POLLOUT, 0};
			owners[n++] = e;
		}
		if (e->status_fd >= 0) {
			pfds[n] = (struct pollfd){e->status_fd, POLLIN, 0};
			owners[n++] = e;
		}
	}
	return n;
}

void exec_on_poll(void *owner, int fd, short revents)
{
	struct exec *e = owner;
	if (!e->used || !e->running)
		return;
	if (fd == e->status_fd) {
		uint32_t word;
		ssize_t r = read(fd, &word, sizeof word);
		if (r == (ssize_t)sizeof word)
			return leader_ended(e, (int)word);
		if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
			close(e->status_fd); /* its init died: its own exit, reaped, is the status */
			e->status_fd = -1;
		}
		return;
	}
	if ((revents & (POLLOUT | POLLERR)) && fd == e->in_fd)
		write_stdin(e);
	for (int k = 0; k < 2; k++)
		if (e->s[k].fd == fd && (revents & (POLLIN | POLLHUP | POLLERR)))
			read_stream(e, &e->s[k], 0);
}

long long exec_next_deadline(void)
{
	long long t = 0;
	for (int i = 0; i < N_EXECS; i++) {
		struct exec *e = &execs[i];
		if (e->used && e->running && e->deadline && !e->timed_out && (!t || e->deadline < t))
			t = e->deadline;
	}
	return t;
}

void exec_check_deadlines(long long now)
{
	for (int i = 0; i < N_EXECS; i++) {
		struct exec *e = &execs[i];
		if (e->used && e->running && e->deadline && !e->timed_out && now >= e->deadline) {
			e->timed_out = 1;
			kill_group(e);
		}
	}
}

void exec_kill_all(void)
{
	if (getpid() == 1) {
		kill(-1, SIGKILL); /* everything in our PID namespace, escapees included */
		return;
	}
	for (int i = 0; i < N_EXECS; i++)
		if (execs[i].used && execs[i].running)
			kill_group(&execs[i]);
}

/* --- resync --- */

void exec_describe(struct jbuf *b)
{
	long long now = now_ms();
	jb_lit(b, "[");
	int first = 1;
	for (int i = 0; i < N_EXECS; i++) {
		struct exec *e = &execs[i];
		if (!e->used || e->acked)
			continue;
		jb_fmt(b, "%s{\"id\":%u,\"name\":", first ? "" : ",", e->id);
		jb_str(b, e->name, strlen(e->name));
		jb_fmt(b, ",\"pid\":%d,\"running\":%s,\"background\":%s,\"tty\":%s,\"startedAgoMs\":%lld,\"argv\":", (int)e->group,
		       e->finished ? "false" : "true", e->background ? "true" : "false", e->tty ? "true" : "false",
		       now - e->started);
		jb_lit(b, e->argv_json ? e->argv_json : "[]");
		jb_lit(b, "}");
		first = 0;
	}
	jb_lit(b, "]");
}

void exec_resend_retained(void)
{
	for (int i = 0; i < N_EXECS; i++) {
		struct exec *e = &execs[i];
		if (!e->used || e->acked)
			continue;
		if (!e->finished) {
			e->resynced = 1;
			continue;
		}
		send_ring(e->id, &e->s[0], &e->s[0].recent);
		send_ring(e->id, &e->s[1], &e->s[1].recent);
		send_msg('X', e->id, e->report, strlen(e->report));
	}
}

/*
 * 'I': the history, oldest first. Each exec is an 'h' {id, name, argv, background, startedAgoMs,
 * finishedAgoMs, deadlineMs, window: [head, tail], report}, then its kept output as 'T' records,
 * all under the request's id; then 'A' {count}.
 */
void exec_history(uint32_t id)
{
	long long now = now_ms();
	int count = 0;
	for (long long after = -1;;) {
		struct exec *next = NULL;
		for (int i = 0; i < N_EXECS; i++) {
			struct exec *e = &execs[i];
			if (e->used && e->acked && e->finished_at > after && (!next || e->finished_at < next->finished_at))
				next = e;
		}
		if (!next)
			break;
		after = next->finished_at;
		/* Execs that finished in the same millisecond go out together. */
		for (int i = 0; i < N_EXECS; i++) {
			struct exec *e = &execs[i];
			if (!e->used || !e->acked || e->finished_at != after)
				continue;
			struct jbuf b = {0};
			jb_fmt(&b, "{\"id\":%u,\"name\":", e->id);
			jb_str(&b, e->name, strlen(e->name));
			jb_fmt(&b,
			       ",\"background\":%s,\"startedAgoMs\":%lld,\"finishedAgoMs\":%lld,\"deadlineMs\":%lld,"
			       "\"window\":[%zu,%zu],\"argv\":",
			       e->background ? "true" : "false", now - e->started, now - e->finished_at,
			       e->deadline ? e->deadline - e->started : 0, e->head_win, e->tail_win);
			jb_lit(&b, e->argv_json ? e->argv_json : "[]");
			jb_lit(&b, ",\"report\":");
			jb_lit(&b, e->report);
			jb_lit(&b, "}");
			send_json('h', id, &b);
			send_ring(id, &e->s[0], &e->s[0].recent);
			send_ring(id, &e->s[1], &e->s[1].recent);
			count++;
		}
	}
	struct jbuf b = {0};
	jb_fmt(&b, "{\"count\":%d}", count);
	send_json('A', id, &b);
}

/* --- processes that outlived their exec --- */

static int read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, cap - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = 0;
	return (int)n;
}

/* A SIGKILL waits for it (sent to its exec's group, not yet acted on: the group is dead all the same). */
static int kill_pending(long pid)
{
	char path[64], status[4096];
	snprintf(path, sizeof path, "/proc/%ld/status", pid);
	if (read_small(path, status, sizeof status) <= 0)
		return 0;
	static const char *const pending[] = {"SigPnd:", "ShdPnd:"};
	for (int i = 0; i < 2; i++) {
		const char *at = strstr(status, pending[i]);
		if (at && strtoull(at + strlen(pending[i]), NULL, 16) & 1ULL << (SIGKILL - 1))
			return 1;
	}
	return 0;
}

void processes_reply(uint32_t id)
{
	DIR *d = opendir("/proc");
	if (!d)
		return send_error(id, "INTERNAL", NULL, "cannot read /proc: %s", strerror(errno));
	struct jbuf b = {0};
	jb_lit(&b, "{\"processes\":[");
	int n = 0;
	struct dirent *de;
	pid_t self = getpid();
	int isolated = under_gvisor();
	while ((de = readdir(d)) && n < 1024) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (*end || pid <= 0 || pid == self || pid == egress_pid())
			continue;
		char path[64], stat[1024], cmd[257];
		snprintf(path, sizeof path, "/proc/%ld/stat", pid);
		if (read_small(path, stat, sizeof stat) <= 0)
			continue;
		char *rp = strrchr(stat, ')');
		char state;
		int ppid, pgid;
		unsigned flags;
		if (!rp || sscanf(rp + 1, " %c %d %d %*d %*d %*d %u", &state, &ppid, &pgid, &flags) != 4)
			continue;
		/* Dead or dying (PF_EXITING: killed with its exec's group, its pipes already closed, not
		   yet a zombie; or its SIGKILL not yet acted on, below) is not alive. */
		if (state == 'Z' || state == 'X' || (flags & 0x4))
			continue;
		/* Outside a container (tests) only our own orphans; inside, every process but ours. */
		if (exec_is_group(pgid) || (self != 1 && ppid != self))
			continue;
		if (isolated && ppid == self)
			continue; /* an exec's init, ours */
		if (kill_pending(pid))
			continue;
		snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
		int len = read_small(path, cmd, sizeof cmd);
		if (len < 0)
			len = 0;
		for (int i = 0; i < len; i++)
			if (!cmd[i])
				cmd[i] = ' ';
		while (len > 0 && cmd[len - 1] == ' ')
			len--;
		jb_fmt(&b, "%s{\"pid\":%ld,\"pgid\":%d,\"command\":", n ? "," : "", pid, pgid);
		jb_str(&b, cmd, (size_t)len);
		jb_lit(&b, "}");
		n++;
	}
	closedir(d);
	jb_lit(&b, "]}");
	send_json('A', id, &b);
}
