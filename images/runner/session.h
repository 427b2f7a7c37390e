/*
 * The session mode of sandpit-runner (`--session`): see session.c for the wire format. This
 * header is what the session's source files share; the one-shot mode (sandpit-runner.c) only
 * calls session_main().
 */
#ifndef SANDPIT_SESSION_H
#define SANDPIT_SESSION_H

#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

int session_main(int argc, char **argv);

/* Bump with every change to the session wire format, with src/runner/session-protocol.ts. */
#define SESSION_PROTOCOL_VERSION 7u

#define KEY_LEN 16
/* PIPE_BUF: one write of at most this size reaches the pipe whole, never mixed with another's. */
#define REC_MAX 4096
#define REC_HEAD (KEY_LEN + 1 + 1 + 4 + 2)
#define REC_DATA (REC_MAX - REC_HEAD)
#define REC_MORE 1
/* A read's data records when its request asks for bulk ones (protocol 4): larger than PIPE_BUF. */
#define BULK_REC_MAX (64u << 10)
#define BULK_REC_DATA (BULK_REC_MAX - REC_HEAD)

/* The largest request body; the resync padding is a little longer, so it completes any torn request. */
#define MAX_REQUEST ((2u << 20) + (64u << 10))
#define RESYNC_PAD (MAX_REQUEST + 64)
#define RESYNC_MARKER "SANDPIT-RESYNC-1"
#define TRAILER "SPQE"

/* Output the runner holds for a gateway that is slow or gone; above it, it stops reading output. */
#define OUTQ_HIGH (4u << 20)
/* What is kept of each stream of an exec whose exit report the gateway has not acknowledged. */
#define RETAINED_TAIL (64u << 10)
#define MAX_RETAINED 64
/* The exec history (protocol 5): what it keeps of acknowledged execs, in the sandbox's own memory. */
#define HISTORY_BYTES (1u << 20)
#define STDIN_WINDOW (1u << 20)
/* The size the runner asks of its stdin and stdout pipes (fs.pipe-max-size is 1 MiB by default). */
#define STDIO_PIPE_BYTES (1 << 20)
#define MAX_EXECS_CAP 256

/* Exit statuses of the runner in session mode (the backend reads them from the container). */
enum {
	EXIT_CLOSED = 0,
	EXIT_FAILED = 1,
	EXIT_TTL = 3,
	EXIT_IDLE = 4,
	EXIT_STDIN_CLOSED = 5,
	EXIT_NEVER_OPENED = 6,
	EXIT_STOPPED = 7,
};

/* --- output: keyed records, queued and written one per write() (session.c) --- */
void send_msg(char type, uint32_t id, const void *data, size_t len); /* splits with MORE */
void send_data(char type, uint32_t id, const void *data, size_t len); /* one record per piece */
/* A bulk record of at most BULK_REC_DATA bytes: its data goes at the returned pointer, then
   bulk_commit() queues the record with the bytes that went there. */
char *bulk_begin(size_t max);
void bulk_commit(char type, uint32_t id, size_t len);
int outq_full(void);
long long now_ms(void);
void note_activity(void);

/* --- a growable JSON text --- */
struct jbuf {
	char *p;
	size_t len, cap;
	int failed;
};
void jb_raw(struct jbuf *b, const char *s, size_t n);
void jb_lit(struct jbuf *b, const char *s);
void jb_str(struct jbuf *b, const char *s, size_t n);
void jb_fmt(struct jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void jb_free(struct jbuf *b);
void send_json(char type, uint32_t id, struct jbuf *b); /* sends and frees */

/* An error reply: 'F' {code, field, message}. */
void send_error(uint32_t id, const char *code, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* --- request bodies: u8 tag, u32be len, bytes --- */
struct rec {
	char tag;
	const char *p;
	uint32_t len;
};
/* Iterates the records of a body; returns 1 with the next in *r, 0 at the end, -1 when malformed. */
int next_rec(const char *body, size_t len, size_t *off, struct rec *r);
uint32_t be32(const unsigned char *p);
uint64_t be64(const unsigned char *p);

/* --- the session's settings (session.c) --- */
extern char **session_env; /* NAME=VALUE, NULL-terminated */
extern int n_session_env;
extern int max_execs;
extern int ws_fd; /* O_PATH of the workspace */
extern unsigned long long session_file_size; /* each exec's RLIMIT_FSIZE (0: as it is) */
extern unsigned session_open_files;          /* each exec's RLIMIT_NOFILE (0: as it is) */
/* Wipes the channel key from this copy of the runner's memory (an isolated exec's init). */
void session_scrub(void);
extern char ws_path[4096];

/* --- execs (session-exec.c) --- */
void exec_start(uint32_t id, const char *body, size_t len);
void exec_data(uint32_t id, const char *p, size_t n);
void exec_eof(uint32_t id);
void exec_kill(uint32_t id);
void exec_resize(uint32_t id, const char *body, size_t len);
void exec_ack(uint32_t id);
int exec_running(void);
/* Adds the poll entries of every exec; returns how many were added. */
struct pollfd;
int exec_pollfds(struct pollfd *pfds, int max, void **owners);
void exec_on_poll(void *owner, int fd, short revents);
void exec_on_sigchld(void);
void exec_pump(void); /* drains the output of execs whose process exited */
long long exec_next_deadline(void);
void exec_check_deadlines(long long now);
void exec_kill_all(void);
void exec_describe(struct jbuf *b); /* resync: the execs the runner knows, as a JSON array */
void exec_resend_retained(void);
void exec_history(uint32_t id); /* 'I': the history of acknowledged execs */
uint32_t exec_last_id(void);    /* the highest exec id so far (new gateways start above it) */
int exec_is_group(pid_t pgid);
void processes_reply(uint32_t id);

/* --- files (session-files.c) --- */
void file_write(uint32_t id, const char *body, size_t len);
int file_upload_data(uint32_t id, const char *p, size_t n); /* 1 if id is an upload */
int file_upload_end(uint32_t id);
void file_read(uint32_t id, const char *body, size_t len);
void file_read_credit(uint32_t id, const char *body, size_t len);
void file_list(uint32_t id, const char *body, size_t len);
void file_remove(uint32_t id, const char *body, size_t len);
void file_mkdir(uint32_t id, const char *body, size_t len);
void file_pump_reads(void); /* sends what reads have credit and room for */
int file_reads_pending(void);
void file_abort_transfers(void);
int file_cancel(uint32_t id); /* 1 if id was an upload or a read */
void watch_add(uint32_t id, const char *body, size_t len);
void watch_remove(uint32_t id);
void watch_clear(void);
int watch_fd(void);
void watch_on_events(void);
long long watch_next_flush(void);
void watch_flush(long long now);

/*
 * Resolves a workspace-relative path one component at a time (openat + O_NOFOLLOW), following
 * symlinks only while they stay beneath the workspace. On success: *dirfd holds the directory of
 * the last component (O_PATH), name its name ("" for the workspace itself) and rel the canonical
 * workspace-relative path. On failure it has sent the error reply for `id` naming `field`.
 */
struct resolved {
	int dirfd;
	char name[256];
	char rel[4200];
};
enum { FOLLOW_LAST = 1, MAKE_PARENTS = 2 };
int resolve_path(uint32_t id, const char *field, const char *path, size_t len, int flags, struct resolved *r);
/* Checks a request's path field: no NUL, not absolute, no '..', names <= 255, <= 4096 in all. */
int check_path(uint32_t id, const char *field, const char *p, size_t n);

#endif
