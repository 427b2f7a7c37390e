/*
 * The sandbox's end of egress on Docker (src/egress, DESIGN.md §6): a sandbox with an allowlist
 * has no network interface but lo and no resolver, and its one way out is sandpit's egress proxy,
 * reached through a Unix socket that the gateway binds on the host and mounts into the sandbox.
 * Programs speak HTTP proxy over TCP, not over a Unix socket, and the images hold no socat: so the
 * runner forwards 127.0.0.1:EGRESS_PORT to that socket, and points the proxy variables at it.
 */
#ifndef SANDPIT_EGRESS_H
#define SANDPIT_EGRESS_H

#define _GNU_SOURCE
#include <stddef.h>
#include <sys/types.h>

/* Where programs find the proxy: http://127.0.0.1:3128 (src/runner/protocol.ts EGRESS_LOCAL_PORT). */
#define EGRESS_PORT 3128

/*
 * Starts the forwarder: binds 127.0.0.1:EGRESS_PORT, then forks a process that accepts there and
 * joins each connection to the Unix socket at `socket_path`, byte for byte, until either side
 * closes. It holds no descriptor of the runner's (its stdio is /dev/null), and dies with the
 * runner. Returns its pid, or -1 with `why` saying what failed (before anything ran).
 */
pid_t egress_start(const char *socket_path, char *why, size_t why_len);

/* The forwarder's pid, or 0 when none runs: not one of the program's processes. */
pid_t egress_pid(void);

/* Stops the forwarder (a one-shot job's, once its program has exited) and reaps it. */
void egress_stop(void);

/*
 * The variables that point a program at the forwarder: HTTP_PROXY, HTTPS_PROXY (and their lower
 * case spellings) and NO_PROXY=localhost,127.0.0.1,::1, so that a session's own servers stay
 * reachable directly. NULL-terminated, static.
 */
extern const char *const EGRESS_ENV[];

#endif
