/* Starting the sandboxed program, in both modes of the runner: see program.h. */
#include "program.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int under_gvisor(void)
{
	return access("/proc/sentry-meminfo", F_OK) == 0;
}

long long oom_kills(void)
{
	static const char *files[] = {"/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"};
	for (size_t i = 0; i < 2; i++) {
		FILE *f = fopen(files[i], "re");
		if (!f)
			continue;
		char key[64];
		long long v;
		while (fscanf(f, "%63s %lld", key, &v) == 2) {
			if (strcmp(key, "oom_kill") == 0) {
				fclose(f);
				return v;
			}
		}
		fclose(f);
	}
	return -1;
}

int program_limits(unsigned long long file_size, unsigned open_files)
{
	struct rlimit core = {0, 0};
	setrlimit(RLIMIT_CORE, &core);
	if (file_size) {
		struct rlimit fsize = {(rlim_t)file_size, (rlim_t)file_size};
		if (setrlimit(RLIMIT_FSIZE, &fsize) != 0)
			return -1;
	}
	if (open_files) {
		struct rlimit nofile = {open_files, open_files};
		if (setrlimit(RLIMIT_NOFILE, &nofile) != 0)
			return -1;
	}
	return 0;
}

static void put_word(int fd, uint32_t word)
{
	while (write(fd, &word, sizeof word) < 0 && errno == EINTR) {
	}
}

static int get_word(int fd, uint32_t *word)
{
	ssize_t n;
	while ((n = read(fd, word, sizeof *word)) < 0 && errno == EINTR) {
	}
	return n == (ssize_t)sizeof *word ? 0 : -1;
}

static int write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : errno; /* no setgroups file: an older kernel, nothing to deny */
	int err = write(fd, text, strlen(text)) < 0 ? errno : 0;
	close(fd);
	return err;
}

/* Maps our one uid and gid to themselves in the new user namespace: the program keeps uid 1000. */
static int map_ids(uid_t uid, gid_t gid)
{
	char map[64];
	snprintf(map, sizeof map, "%u %u 1\n", uid, uid);
	int err = write_text("/proc/self/uid_map", map);
	if (!err)
		err = write_text("/proc/self/setgroups", "deny");
	snprintf(map, sizeof map, "%u %u 1\n", gid, gid);
	if (!err)
		err = write_text("/proc/self/gid_map", map);
	return err;
}

static void drop_capabilities(void)
{
	for (int cap = 0; cap <= 63; cap++)
		prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof data);
	syscall(SYS_capset, &hdr, data);
}

/* PID 1 of the program's namespaces (see program.h). */
static void inner_init(uid_t uid, gid_t gid, int status_fd, void (*program)(void *), void *arg, void (*scrub)(void),
		       int linger)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (scrub)
		scrub();
	/* The id maps are root's while we are not dumpable; nothing but the runner runs yet. */
	prctl(PR_SET_DUMPABLE, 1);
	int err = map_ids(uid, gid);
	prctl(PR_SET_DUMPABLE, 0);
	pid_t child = err ? -1 : fork();
	if (!err && child < 0)
		err = errno;
	if (child == 0) {
		drop_capabilities();
		program(arg);
		_exit(126);
	}
	for (int fd = 0; fd < 1024; fd++)
		if (fd != status_fd)
			close(fd);
	put_word(status_fd, (uint32_t)err);
	if (err)
		_exit(125);
	int reported = 0;
	for (;;) {
		int st;
		pid_t p = waitpid(-1, &st, 0);
		if (p == child && !reported) {
			put_word(status_fd, (uint32_t)st);
			reported = 1;
			if (!linger)
				_exit(0);
		}
		if (p < 0 && errno == ECHILD)
			_exit(0);
		if (p < 0 && errno != EINTR)
			_exit(125);
	}
}

struct spawned spawn_isolated(void (*program)(void *), void *arg, void (*scrub)(void), int linger, char *why,
			      size_t why_len)
{
	struct spawned none = {-1, -1};
	int st[2];
	if (pipe2(st, O_CLOEXEC) != 0) {
		snprintf(why, why_len, "pipe: %s", strerror(errno));
		return none;
	}
	uid_t uid = getuid();
	gid_t gid = getgid();
	pid_t init = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWPID | SIGCHLD, 0, 0, 0, 0);
	if (init < 0) {
		snprintf(why, why_len,
			 "cannot give the program its own namespaces under gVisor (clone: %s); sandpit's seccomp profile "
			 "for runsc allows them",
			 strerror(errno));
		close(st[0]);
		close(st[1]);
		return none;
	}
	if (init == 0) {
		close(st[0]);
		inner_init(uid, gid, st[1], program, arg, scrub, linger);
	}
	close(st[1]);
	uint32_t err;
	if (get_word(st[0], &err) != 0 || err) {
		snprintf(why, why_len, "cannot set up the program's namespaces under gVisor: %s",
			 err ? strerror((int)err) : "its init died");
		close(st[0]);
		kill(init, SIGKILL);
		waitpid(init, NULL, 0);
		return none;
	}
	return (struct spawned){init, st[0]};
}

int program_status(struct spawned s, int status)
{
	uint32_t word;
	if (s.status_fd >= 0 && get_word(s.status_fd, &word) == 0)
		return (int)word;
	return status;
}

#define STASH_MAX 4

int stash_fds(const int *fds, int n)
{
	if (n < 1 || n > STASH_MAX) {
		errno = EINVAL;
		return -1;
	}
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return -1;
	union {
		char buf[CMSG_SPACE(sizeof(int) * STASH_MAX)];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof u);
	char byte = 0;
	struct iovec iov = {&byte, 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			   .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
	int null = -1;
	if (sendmsg(sv[1], &m, MSG_NOSIGNAL) != 1 || (null = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0)
		goto fail;
	for (int i = 0; i < n; i++)
		if (dup2(null, fds[i]) < 0)
			goto fail; /* the stashed descriptors stay queued, out of reach, until the socket goes */
	close(null);
	close(sv[1]);
	return sv[0];
fail:;
	int err = errno;
	if (null >= 0)
		close(null);
	close(sv[0]);
	close(sv[1]);
	errno = err;
	return -1;
}

int unstash_fds(int sock, const int *fds, int n)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * STASH_MAX)];
		struct cmsghdr align;
	} u;
	char byte;
	struct iovec iov = {&byte, 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
	ssize_t got;
	while ((got = recvmsg(sock, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
	}
	int err = errno;
	close(sock);
	struct cmsghdr *c = got == 1 ? CMSG_FIRSTHDR(&m) : NULL;
	if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int) * (size_t)n)) {
		errno = got < 0 ? err : EPROTO;
		return -1;
	}
	int back[STASH_MAX];
	memcpy(back, CMSG_DATA(c), sizeof(int) * (size_t)n);
	int rc = 0;
	for (int i = 0; i < n; i++) {
		if (dup2(back[i], fds[i]) < 0)
			rc = -1;
		close(back[i]);
	}
	return rc;
}

int others_alive(void)
{
	DIR *d = opendir("/proc");
	if (!d)
		return -1;
	pid_t self = getpid();
	int found = 0;
	struct dirent *de;
	while (!found && (de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (*end || pid <= 0 || pid == self)
			continue;
		char path[64], stat[512];
		snprintf(path, sizeof path, "/proc/%ld/stat", pid);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue; /* gone meanwhile */
		ssize_t n = read(fd, stat, sizeof stat - 1);
		close(fd);
		stat[n > 0 ? n : 0] = 0;
		char *rp = strrchr(stat, ')');
		found = !rp || (rp[1] && rp[2] != 'Z' && rp[2] != 'X');
	}
	closedir(d);
	return found;
}

void ring_push(struct ring *r, const char *p, size_t n)
{
	if (r->cap == 0 || n == 0)
		return;
	if (n >= r->cap) {
		memcpy(r->buf, p + n - r->cap, r->cap);
		r->start = 0;
		r->len = r->cap;
		return;
	}
	size_t end = (r->start + r->len) % r->cap;
	size_t first = n < r->cap - end ? n : r->cap - end;
	memcpy(r->buf + end, p, first);
	memcpy(r->buf, p + first, n - first);
	size_t over = r->len + n > r->cap ? r->len + n - r->cap : 0;
	r->len = r->len + n - over;
	r->start = (r->start + over) % r->cap;
}

int network_refusal(char *why, size_t why_len)
{
	struct if_nameindex *ifs = if_nameindex();
	if (!ifs) {
		snprintf(why, why_len, "cannot list the sandbox's network interfaces: %s", strerror(errno));
		return -1;
	}
	int refused = 0;
	for (struct if_nameindex *i = ifs; i->if_index != 0 && !refused; i++) {
		if (strcmp(i->if_name, "lo") != 0) {
			snprintf(why, why_len,
				 "network interface %s exists although egress is none: this sandbox is not isolated "
				 "from the network",
				 i->if_name);
			refused = -1;
		}
	}
	if_freenameindex(ifs);
	return refused;
}

void write_termination_log(const char *text, size_t len)
{
	int tl = open("/dev/termination-log", O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (tl < 0)
		return;
	while (len > 0) {
		ssize_t n = write(tl, text, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		text += n;
		len -= (size_t)n;
	}
	close(tl);
}

void write_termination_failure(const char *msg)
{
	/* {"failure": msg}, msg escaped as a JSON string (each byte takes at most 6). */
	char json[6 * 1024 + 32];
	size_t n = (size_t)snprintf(json, sizeof json, "{\"failure\":\"");
	for (const unsigned char *c = (const unsigned char *)msg; *c && n + 8 < sizeof json; c++) {
		if (*c == '"' || *c == '\\')
			n += (size_t)snprintf(json + n, sizeof json - n, "\\%c", *c);
		else if (*c < 0x20)
			n += (size_t)snprintf(json + n, sizeof json - n, "\\u%04x", *c);
		else
			json[n++] = (char)*c;
	}
	n += (size_t)snprintf(json + n, sizeof json - n, "\"}");
	write_termination_log(json, n);
}
