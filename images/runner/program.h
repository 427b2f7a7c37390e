/*
 * Starting the sandboxed program, the same way in both modes of the runner (sandpit-runner.c
 * for one-shot jobs, session-exec.c for a session's execs): its limits, its isolation from the
 * runner under gVisor, the OOM-kill count that tells how it ended, and the ring that keeps the
 * tail of its output.
 */
#ifndef SANDPIT_PROGRAM_H
#define SANDPIT_PROGRAM_H

#define _GNU_SOURCE
#include <stddef.h>
#include <sys/types.h>

/* gVisor's Sentry announces itself with /proc/sentry-meminfo; no Linux kernel has it. */
int under_gvisor(void);

/* The memory cgroup's OOM-kill counter (cgroup v1 memory.oom_control, or v2), or -1 when unreadable. */
long long oom_kills(void);

/*
 * In the program's process, before exec: no core dumps, RLIMIT_FSIZE and RLIMIT_NOFILE as given
 * (0: leave it as it is). Returns -1 when a limit cannot be set.
 */
int program_limits(unsigned long long file_size, unsigned open_files);

/* The process the runner waits for: the program itself, or its init under gVisor. */
struct spawned {
	pid_t pid;
	int status_fd; /* under gVisor: where the init reports the program's wait status; else -1 */
};

/*
 * Under gVisor a process of the same uid may open /proc/1/fd and signal PID 1, which Linux stops
 * (the runner is not dumpable, and PID 1 of its namespace). So there the program runs in its own
 * user and PID namespaces, below a small init: it cannot name the runner's process, so it can
 * neither signal nor trace it. The Sentry implements those namespaces itself.
 *
 * The init first calls scrub() (it is a copy of the runner: the channel key and whatever else is
 * secret must go from its memory), maps the runner's uid and gid to themselves, forks the program
 * (which drops every capability it has in its namespace and calls program(arg), which must not
 * return), closes every descriptor but the status pipe, and writes u32 0 there (or the errno of
 * the setup, and exits). Then it writes the program's wait status when it ends. With `linger` it
 * then reaps what the program left behind until nothing is left, as the init of a shell would;
 * without, it exits at once, and every process left in its namespace dies with it.
 *
 * Returns the init, or pid -1 with `why` saying what failed.
 */
struct spawned spawn_isolated(void (*program)(void *), void *arg, void (*scrub)(void), int linger, char *why,
			      size_t why_len);

/* The program's wait status: reported by its init when isolated (or the init's own, if it was killed). */
int program_status(struct spawned s, int status);

/*
 * Its namespaces do not hide the container's /proc from the program: runsc (Debian 12's, 20221219)
 * refuses every mount(2) and umount2(2) in a user namespace (its mount namespaces all belong to the
 * first one, even with CLONE_NEWNS), so neither a /proc of the program's own PID namespace nor
 * anything over /proc/1 can be mounted. So under gVisor it can still open the runner's stdin,
 * stdout and stderr through /proc/1/fd (0555 there, whatever the runner's dumpable flag), and read
 * its environ and cmdline (nothing secret: the image's environment and the runner's command line),
 * though not its memory. What no process holds is out of its
 * reach: stash_fds() sends `fds` (at most 4) in one SCM_RIGHTS message that waits, queued, on a
 * socket (which /proc/1/fd cannot reopen), and points them at /dev/null; it returns the socket,
 * or -1 with errno. unstash_fds() puts them back, closing the socket: call it only once no process
 * of the program is left, or it could open them then. It returns 0, or -1 with errno.
 */
int stash_fds(const int *fds, int n);
int unstash_fds(int sock, const int *fds, int n);

/* Whether any process but ours (and zombies, which hold no descriptors) is in /proc: -1 if unreadable. */
int others_alive(void);

/*
 * Egress none fails closed where nothing else is known to cut the network off (a cluster that does
 * not enforce NetworkPolicy): whether the sandbox has a network interface besides lo. 0 when it has
 * none; otherwise -1, with `why` saying which one (the words src/runner/protocol.ts recognises) or
 * that the list could not be read. Both modes refuse to start then.
 */
int network_refusal(char *why, size_t why_len);

/* The runner's own failure, {"failure": msg}, in /dev/termination-log when it exists (Kubernetes). */
void write_termination_failure(const char *msg);
void write_termination_log(const char *text, size_t len);

/* The last `cap` bytes of a stream, circular: the tail of its output that both modes keep. */
struct ring {
	char *buf;
	size_t cap, len, start;
};
void ring_push(struct ring *r, const char *p, size_t n);

#endif
