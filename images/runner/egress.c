/* The egress forwarder: 127.0.0.1:EGRESS_PORT to the proxy's Unix socket. See egress.h. */
#include "egress.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* Connections joined at once; more wait in the listen backlog (the proxy's own limit is 32). */
#define MAX_PAIRS 64
#define BUF_SIZE 65536

const char *const EGRESS_ENV[] = {
	"HTTP_PROXY=http://127.0.0.1:3128",  "HTTPS_PROXY=http://127.0.0.1:3128",
	"http_proxy=http://127.0.0.1:3128",  "https_proxy=http://127.0.0.1:3128",
	"NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1",
	NULL,
};

static pid_t forwarder;

pid_t egress_pid(void)
{
	return forwarder;
}

void egress_stop(void)
{
	if (forwarder <= 0)
		return;
	kill(forwarder, SIGKILL);
	while (waitpid(forwarder, NULL, 0) < 0 && errno == EINTR) {
	}
	forwarder = 0;
}

/* One direction of a joined pair: bytes read from `from`, not yet all written to `to`. */
struct leg {
	int from, to;
	char *buf;
	size_t len, off;
	int eof; /* `from` ended: once the buffer is written, `to` is shut for writing */
	int done;
};

struct pair {
	int used;
	struct leg leg[2];
};

static struct pair pairs[MAX_PAIRS];
static const char *target;

static void close_pair(struct pair *p)
{
	close(p->leg[0].from);
	close(p->leg[0].to);
	free(p->leg[0].buf);
	free(p->leg[1].buf);
	memset(p, 0, sizeof *p);
}

/* A refusal the program can read, when the proxy's socket cannot be reached at all. */
static void refuse(int fd, int err)
{
	char msg[512];
	int body = snprintf(msg, sizeof msg, "sandpit egress: the proxy's socket cannot be reached (%s)\n", strerror(err));
	char head[256];
	int n = snprintf(head, sizeof head,
			 "HTTP/1.1 502 Bad Gateway (sandpit egress: the proxy is not reachable)\r\n"
			 "Content-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
			 body);
	if (write(fd, head, (size_t)n) < 0 || write(fd, msg, (size_t)body) < 0) {
		/* the program went away first */
	}
	close(fd);
}

static void join(int client)
{
	int up = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	strncpy(addr.sun_path, target, sizeof addr.sun_path - 1);
	if (up < 0 || connect(up, (struct sockaddr *)&addr, sizeof addr) != 0) {
		int err = errno;
		if (up >= 0)
			close(up);
		return refuse(client, err);
	}
	for (int i = 0; i < MAX_PAIRS; i++) {
		struct pair *p = &pairs[i];
		if (p->used)
			continue;
		char *a = malloc(BUF_SIZE), *b = malloc(BUF_SIZE);
		if (!a || !b) {
			free(a);
			free(b);
			break;
		}
		fcntl(client, F_SETFL, O_NONBLOCK);
		fcntl(up, F_SETFL, O_NONBLOCK);
		*p = (struct pair){1, {{client, up, a, 0, 0, 0, 0}, {up, client, b, 0, 0, 0, 0}}};
		return;
	}
	close(up);
	refuse(client, EMFILE);
}

/* Moves what it can along one leg; returns -1 when the pair is broken. */
static int pump(struct leg *l, short from_ev, short to_ev)
{
	if (l->len == 0 && !l->eof && (from_ev & (POLLIN | POLLHUP | POLLERR))) {
		ssize_t n = read(l->from, l->buf, BUF_SIZE);
		if (n > 0) {
			l->len = (size_t)n;
			l->off = 0;
		} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			l->eof = 1;
		}
	}
	if (l->len > l->off && (to_ev & (POLLOUT | POLLERR | POLLHUP) || from_ev)) {
		ssize_t n = write(l->to, l->buf + l->off, l->len - l->off);
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		if (n > 0)
			l->off += (size_t)n;
		if (l->off == l->len)
			l->len = l->off = 0;
	}
	if (l->eof && l->len == 0 && !l->done) {
		shutdown(l->to, SHUT_WR);
		l->done = 1;
	}
	return 0;
}

static void serve(int listener)
{
	struct pollfd pfds[1 + 2 * MAX_PAIRS];
	for (;;) {
		int n = 0, at[MAX_PAIRS];
		pfds[n++] = (struct pollfd){listener, POLLIN, 0};
		for (int i = 0; i < MAX_PAIRS; i++) {
			struct pair *p = &pairs[i];
			at[i] = -1;
			if (!p->used)
				continue;
			at[i] = n;
			for (int k = 0; k < 2; k++) {
				struct leg *l = &p->leg[k];
				/* Each socket: readable when its leg's buffer is empty, writable when the other leg has bytes. */
				short ev = (l->len == 0 && !l->eof ? POLLIN : 0) | (p->leg[1 - k].len > 0 ? POLLOUT : 0);
				/* Nothing wanted: left out, or a hung-up socket would wake poll at once, forever. */
				pfds[n++] = (struct pollfd){ev ? l->from : -1, ev, 0};
			}
		}
		if (poll(pfds, (nfds_t)n, -1) < 0 && errno != EINTR)
			_exit(1);
		if (pfds[0].revents & POLLIN) {
			int c = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
			if (c >= 0)
				join(c);
		}
		for (int i = 0; i < MAX_PAIRS; i++) {
			struct pair *p = &pairs[i];
			if (!p->used || at[i] < 0)
				continue;
			short e0 = pfds[at[i]].revents, e1 = pfds[at[i] + 1].revents;
			if (pump(&p->leg[0], e0, e1) < 0 || pump(&p->leg[1], e1, e0) < 0 || (p->leg[0].done && p->leg[1].done))
				close_pair(p);
		}
	}
}

static int listen_local(char *why, size_t why_len)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(EGRESS_PORT)};
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
	    bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 128) != 0) {
		snprintf(why, why_len, "cannot listen on 127.0.0.1:%d for the egress proxy: %s", EGRESS_PORT,
			 strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

pid_t egress_start(const char *socket_path, char *why, size_t why_len)
{
	if (socket_path[0] != '/' || strlen(socket_path) >= sizeof((struct sockaddr_un *)0)->sun_path) {
		snprintf(why, why_len, "bad egress proxy socket path");
		return -1;
	}
	int listener = listen_local(why, why_len);
	if (listener < 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(why, why_len, "cannot start the egress forwarder: %s", strerror(errno));
		close(listener);
		return -1;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_IGN);
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		for (int fd = 0; fd < 3; fd++)
			dup2(null, fd);
		for (int fd = 3; fd < 1024; fd++)
			if (fd != listener)
				close(fd);
		target = socket_path;
		serve(listener);
		_exit(0);
	}
	close(listener);
	forwarder = pid;
	return pid;
}
