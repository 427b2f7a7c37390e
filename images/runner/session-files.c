/*
 * The files of a session, confined to its workspace: every path is resolved one component at a
 * time with openat(O_NOFOLLOW), following a symlink only while it stays beneath the workspace
 * (openat2's RESOLVE_BENEATH is not used: Debian's runsc answers it with ENOSYS). Only regular
 * files are read or written: device files, FIFOs and sockets are refused. Uploads replace a file
 * only once they are complete, so a failed one leaves nothing behind.
 */
#include "session.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define MAX_PATH 4096
#define MAX_LINKS 40
#define MAX_UPLOADS 32
#define MAX_READS 32
#define MAX_DEPTH 128
#define LIST_BATCH (32u << 10)
#define MAX_WDS 1024
#define MAX_WATCHES 64
#define WATCH_COALESCE_MS 100
#define QUIET 4

/* --- paths --- */

int check_path(uint32_t id, const char *field, const char *p, size_t n)
{
	if (n > MAX_PATH)
		return send_error(id, "INVALID_REQUEST", field, "the path is over %d bytes", MAX_PATH), 0;
	if (memchr(p, 0, n))
		return send_error(id, "INVALID_REQUEST", field, "the path holds a NUL byte"), 0;
	if (n > 0 && p[0] == '/')
		return send_error(id, "INVALID_REQUEST", field, "the path is absolute; give it relative to the workspace"), 0;
	for (size_t s = 0; s < n;) {
		size_t e = s;
		while (e < n && p[e] != '/')
			e++;
		if (e - s == 2 && p[s] == '.' && p[s + 1] == '.')
			return send_error(id, "INVALID_REQUEST", field, "the path holds '..'"), 0;
		if (e - s > 255)
			return send_error(id, "INVALID_REQUEST", field, "a name in the path is over 255 bytes"), 0;
		s = e + 1;
	}
	return 1;
}

static int fail(uint32_t id, int flags, const char *code, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static int fail(uint32_t id, int flags, const char *code, const char *field, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (!(flags & QUIET))
		send_error(id, code, field, "%s", msg);
	return 0;
}

/* Opens the directory at canonical path `canon` ("" for the workspace) without following anything. */
static int reopen(const char *canon)
{
	int fd = fcntl(ws_fd, F_DUPFD_CLOEXEC, 0);
	char part[256];
	for (const char *s = canon; fd >= 0 && *s;) {
		const char *e = strchrnul(s, '/');
		memcpy(part, s, (size_t)(e - s));
		part[e - s] = 0;
		int next = openat(fd, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = next;
		s = *e ? e + 1 : e;
	}
	return fd;
}

static void canon_pop(char *canon, char *last)
{
	char *slash = strrchr(canon, '/');
	if (last)
		strcpy(last, slash ? slash + 1 : canon);
	if (slash)
		*slash = 0;
	else
		canon[0] = 0;
}

/* rem := target + "/" + rem[pos..]: what is left to resolve after following a symlink. */
static int splice_target(char *rem, size_t *rem_len, size_t pos, const char *target, size_t tlen, size_t cap)
{
	size_t rest = *rem_len - pos;
	if (tlen + 1 + rest + 1 > cap)
		return -1;
	memmove(rem + tlen + 1, rem + pos, rest);
	memcpy(rem, target, tlen);
	rem[tlen] = '/';
	*rem_len = tlen + 1 + rest;
	return 0;
}

int resolve_path(uint32_t id, const char *field, const char *path, size_t len, int flags, struct resolved *r)
{
	static char rem[4 * MAX_PATH];
	char canon[sizeof r->rel], comp[256], target[MAX_PATH];
	size_t rem_len = len, pos = 0;
	int links = 0, have_final = 0;
	if (len >= sizeof rem)
		return fail(id, flags, "INVALID_REQUEST", field, "the path is too long");
	memcpy(rem, path, len);
	canon[0] = 0;
	int cur = fcntl(ws_fd, F_DUPFD_CLOEXEC, 0);
	while (cur >= 0) {
		while (pos < rem_len && rem[pos] == '/')
			pos++;
		if (pos >= rem_len)
			break;
		size_t start = pos;
		while (pos < rem_len && rem[pos] != '/')
			pos++;
		size_t q = pos;
		while (q < rem_len && rem[q] == '/')
			q++;
		int last = q >= rem_len;
		if (pos - start > 255) {
			close(cur);
			return fail(id, flags, "INVALID_REQUEST", field, "a name is over 255 bytes");
		}
		memcpy(comp, rem + start, pos - start);
		comp[pos - start] = 0;
		if (strcmp(comp, ".") == 0)
			continue;
		if (strcmp(comp, "..") == 0) {
			close(cur);
			if (!canon[0])
				return fail(id, flags, "INVALID_REQUEST", field, "a symlink leads out of the workspace");
			canon_pop(canon, NULL);
			cur = reopen(canon);
			continue;
		}
		struct stat st;
		char shown[sizeof canon + 256];
		snprintf(shown, sizeof shown, "%s%s%s", canon, canon[0] ? "/" : "", comp);
		if (fstatat(cur, comp, &st, AT_SYMLINK_NOFOLLOW) != 0) {
			if (errno != ENOENT) {
				close(cur);
				return fail(id, flags, "INTERNAL", field, "%s: %s", shown, strerror(errno));
			}
			if (last) {
				have_final = 1;
				break;
			}
			if (!(flags & MAKE_PARENTS) || (mkdirat(cur, comp, 0755) != 0 && errno != EEXIST)) {
				close(cur);
				return fail(id, flags, "NOT_FOUND", field, "%s: no such directory", shown);
			}
		} else if (S_ISLNK(st.st_mode)) {
			if (last && !(flags & FOLLOW_LAST)) {
				have_final = 1;
				break;
			}
			ssize_t n = ++links > MAX_LINKS ? -1 : readlinkat(cur, comp, target, sizeof target - 1);
			if (n < 0) {
				close(cur);
				return fail(id, flags, "INVALID_REQUEST", field, "%s: too many symlinks, or an unreadable one", shown);
			}
			target[n] = 0;
			const char *t = target;
			if (target[0] == '/') {
				size_t wl = strlen(ws_path);
				if (strncmp(target, ws_path, wl) != 0 || (target[wl] != '/' && target[wl] != 0)) {
					close(cur);
					return fail(id, flags, "INVALID_REQUEST", field, "%s is a symlink that leads out of the workspace (to %s)",
						    shown, target);
				}
				t = target + wl;
				canon[0] = 0;
				close(cur);
				cur = reopen(canon);
			}
			if (splice_target(rem, &rem_len, pos, t, strlen(t), sizeof rem) != 0) {
				close(cur);
				return fail(id, flags, "INVALID_REQUEST", field, "%s: the path is too long", shown);
			}
			pos = 0;
			continue;
		} else if (last) {
			have_final = 1;
			break;
		} else if (!S_ISDIR(st.st_mode)) {
			close(cur);
			return fail(id, flags, "INVALID_REQUEST", field, "%s is not a directory", shown);
		}
		int next = openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(cur);
		cur = next;
		if (strlen(canon) + strlen(comp) + 2 > MAX_PATH) {
			if (cur >= 0)
				close(cur);
			return fail(id, flags, "INVALID_REQUEST", field, "the path is over 4096 bytes");
		}
		if (canon[0])
			strcat(canon, "/");
		strcat(canon, comp);
	}
	if (cur < 0)
		return fail(id, flags, "INVALID_REQUEST", field, "the workspace changed while the path was resolved");
	if (!have_final) { /* it named a directory (or the workspace itself) */
		if (!canon[0]) {
			r->dirfd = cur;
			r->name[0] = r->rel[0] = 0;
			return 1;
		}
		close(cur);
		canon_pop(canon, comp);
		cur = reopen(canon);
		if (cur < 0)
			return fail(id, flags, "INVALID_REQUEST", field, "the workspace changed while the path was resolved");
	}
	r->dirfd = cur;
	strcpy(r->name, comp);
	snprintf(r->rel, sizeof r->rel, "%s%s%s", canon, canon[0] ? "/" : "", comp);
	return 1;
}

/* --- entries --- */

static const char *type_of(mode_t m)
{
	return S_ISREG(m) ? "file" : S_ISDIR(m) ? "directory" : S_ISLNK(m) ? "symlink" : "other";
}

static void entry_json(struct jbuf *b, const char *rel, size_t rlen, const struct stat *st)
{
	jb_lit(b, "{\"path\":");
	jb_str(b, rel, rlen);
	jb_fmt(b, ",\"type\":\"%s\",\"size\":%lld,\"mode\":%u,\"mtimeMs\":%lld}", type_of(st->st_mode),
	       S_ISREG(st->st_mode) ? (long long)st->st_size : 0LL, (unsigned)(st->st_mode & 07777),
	       (long long)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000);
}

static void reply_entry(uint32_t id, int dirfd, const char *name, const char *rel)
{
	struct stat st;
	if (fstatat(dirfd, name[0] ? name : ".", &st, AT_SYMLINK_NOFOLLOW) != 0)
		return send_error(id, "INTERNAL", "path", "%s: %s", rel, strerror(errno));
	struct jbuf b = {0};
	entry_json(&b, rel, strlen(rel), &st);
	send_json('A', id, &b);
}

struct fields {
	const char *path;
	size_t path_len;
	int have_path, recursive, append, last, bulk;
	uint64_t offset, size, max;
	int have_offset, have_size, have_max;
	uint32_t mode, credit, entries;
	int have_mode;
	const char *data;
	size_t data_len;
};

/* Reads the records file requests use; on a malformed one it has sent the error. */
static int parse_fields(uint32_t id, const char *body, size_t len, struct fields *f)
{
	size_t off = 0;
	struct rec r;
	int rc;
	memset(f, 0, sizeof *f);
	while ((rc = next_rec(body, len, &off, &r)) > 0) {
		const unsigned char *u = (const unsigned char *)r.p;
		int ok = 1;
		switch (r.tag) {
		case 'p':
			f->path = r.p;
			f->path_len = r.len;
			f->have_path = 1;
			break;
		case 'r':
			f->recursive = 1;
			break;
		case 'a':
			f->append = 1;
			break;
		case 'z':
			f->last = 1;
			break;
		case 'B':
			f->bulk = 1;
			break;
		case 'd':
			f->data = r.p;
			f->data_len = r.len;
			break;
		case 'o':
		case 's':
		case 'm':
			ok = r.len == 8;
			if (ok)
				*(r.tag == 'o' ? &f->offset : r.tag == 's' ? &f->size : &f->max) = be64(u);
			*(r.tag == 'o' ? &f->have_offset : r.tag == 's' ? &f->have_size : &f->have_max) = 1;
			break;
		case 'M':
		case 'c':
		case 'n':
			ok = r.len == 4;
			if (ok)
				*(r.tag == 'M' ? &f->mode : r.tag == 'c' ? &f->credit : &f->entries) = be32(u);
			f->have_mode |= r.tag == 'M';
			break;
		default:
			ok = 0;
		}
		if (!ok)
			return send_error(id, "INVALID_REQUEST", NULL, "bad file record 0x%02x", (unsigned char)r.tag), -1;
	}
	if (rc < 0)
		return send_error(id, "INVALID_REQUEST", NULL, "malformed file request"), -1;
	if (!f->have_path)
		f->path = "";
	return check_path(id, "path", f->path, f->path_len) ? 0 : -1;
}

/* --- uploads --- */

struct upload {
	int used;
	uint32_t id;
	int fd, dirfd, replace;
	uint32_t mode;
	char name[256], tmp[64], rel[sizeof ((struct resolved *)0)->rel];
};
static struct upload uploads[MAX_UPLOADS];

static struct upload *find_upload(uint32_t id)
{
	for (int i = 0; i < MAX_UPLOADS; i++)
		if (uploads[i].used && uploads[i].id == id)
			return &uploads[i];
	return NULL;
}

static void drop_upload(struct upload *u)
{
	close(u->fd);
	if (u->replace)
		unlinkat(u->dirfd, u->tmp, 0);
	close(u->dirfd);
	u->used = 0;
}

static unsigned long long fsize_limit(void)
{
	struct rlimit rl;
	return getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (unsigned long long)rl.rlim_cur : ULLONG_MAX;
}

static void size_error(uint32_t id, int err, const char *rel)
{
	struct statvfs vfs;
	unsigned long long total = fstatvfs(ws_fd, &vfs) == 0 ? (unsigned long long)vfs.f_blocks * vfs.f_frsize : 0;
	if (err == EFBIG)
		send_error(id, "TOO_LARGE", "data", "%s: over the largest file a sandbox may write (%llu bytes)", rel, fsize_limit());
	else
		send_error(id, "TOO_LARGE", "data", "%s: the workspace is full (it holds %llu bytes)", rel, total);
}

static int write_chunk(struct upload *u, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(u->fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			int err = errno;
			if (err == EFBIG || err == ENOSPC || err == EDQUOT)
				size_error(u->id, err, u->rel);
			else
				send_error(u->id, "INTERNAL", "data", "%s: %s", u->rel, strerror(err));
			drop_upload(u);
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static void commit(struct upload *u)
{
	if (u->replace) {
		fchmod(u->fd, u->mode & 0777);
		if (renameat(u->dirfd, u->tmp, u->dirfd, u->name) != 0) {
			send_error(u->id, "INVALID_REQUEST", "path", "%s: %s", u->rel, strerror(errno));
			return drop_upload(u);
		}
		u->replace = 0;
	}
	reply_entry(u->id, u->dirfd, u->name, u->rel);
	close(u->fd);
	close(u->dirfd);
	u->used = 0;
}

/* Refuses what cannot fit before a byte is written: over the file size limit, or the free space. */
static int fits(uint32_t id, struct fields *f, const struct stat *old, int exists, const char *rel)
{
	if (!f->have_size)
		return 1;
	unsigned long long start = f->have_offset ? f->offset : f->append && exists ? (unsigned long long)old->st_size : 0;
	if (start + f->size > fsize_limit())
		return size_error(id, EFBIG, rel), 0;
	struct statvfs vfs;
	if (fstatvfs(ws_fd, &vfs) == 0) {
		unsigned long long avail = (unsigned long long)vfs.f_bavail * vfs.f_frsize;
		unsigned long long freed = exists && !f->have_offset && !f->append ? (unsigned long long)old->st_size : 0;
		if (f->size > avail + freed)
			return size_error(id, ENOSPC, rel), 0;
	}
	return 1;
}

void file_write(uint32_t id, const char *body, size_t len)
{
	struct fields f;
	struct resolved r;
	if (find_upload(id))
		return send_error(id, "INVALID_REQUEST", NULL, "upload %u is under way", id);
	if (parse_fields(id, body, len, &f) != 0 || !resolve_path(id, "path", f.path, f.path_len, FOLLOW_LAST | MAKE_PARENTS, &r))
		return;
	struct upload *u = NULL;
	for (int i = 0; i < MAX_UPLOADS && !u; i++)
		if (!uploads[i].used)
			u = &uploads[i];
	struct stat old;
	int exists = r.name[0] && fstatat(r.dirfd, r.name, &old, AT_SYMLINK_NOFOLLOW) == 0;
	const char *why = !r.name[0] ? "is the workspace itself" : exists && S_ISDIR(old.st_mode) ? "is a directory"
		       : exists && !S_ISREG(old.st_mode) ? "is not a regular file (device files, FIFOs and sockets are refused)"
		       : NULL;
	if (why || !u) {
		if (u)
			send_error(id, "INVALID_REQUEST", "path", "%s %s", r.rel[0] ? r.rel : "the path", why);
		else
			send_error(id, "BUSY", NULL, "%d uploads are under way already", MAX_UPLOADS);
		close(r.dirfd);
		return;
	}
	if (!fits(id, &f, &old, exists, r.rel)) {
		close(r.dirfd);
		return;
	}
	memset(u, 0, sizeof *u);
	u->id = id;
	u->dirfd = r.dirfd;
	u->mode = f.have_mode ? f.mode : 0644;
	u->replace = !f.have_offset && !f.append;
	strcpy(u->name, r.name);
	strcpy(u->rel, r.rel);
	if (u->replace) {
		snprintf(u->tmp, sizeof u->tmp, ".sandpit-upload-%u.part", id);
		unlinkat(r.dirfd, u->tmp, 0);
		u->fd = openat(r.dirfd, u->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	} else {
		u->fd = openat(r.dirfd, r.name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, u->mode & 0777);
	}
	struct stat st;
	if (u->fd < 0 || fstat(u->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		send_error(id, "INVALID_REQUEST", "path", "%s: %s", r.rel, u->fd < 0 ? strerror(errno) : "not a regular file");
		if (u->fd >= 0)
			close(u->fd);
		close(r.dirfd);
		return;
	}
	u->used = 1;
	if (!u->replace && lseek(u->fd, f.append ? 0 : (off_t)f.offset, f.append ? SEEK_END : SEEK_SET) < 0) {
		send_error(id, "INVALID_REQUEST", "offset", "%s: %s", r.rel, strerror(errno));
		return drop_upload(u);
	}
	if (f.data_len && write_chunk(u, f.data, f.data_len) != 0)
		return;
	if (f.last)
		commit(u);
}

int file_upload_data(uint32_t id, const char *p, size_t n)
{
	struct upload *u = find_upload(id);
	if (!u)
		return 0;
	write_chunk(u, p, n);
	return 1;
}

int file_upload_end(uint32_t id)
{
	struct upload *u = find_upload(id);
	if (!u)
		return 0;
	commit(u);
	return 1;
}

/* --- downloads --- */

struct download {
	int used;
	uint32_t id;
	int fd, bulk;
	unsigned long long left, sent, credit;
};
static struct download reads[MAX_READS];

void file_read(uint32_t id, const char *body, size_t len)
{
	struct fields f;
	struct resolved r;
	if (parse_fields(id, body, len, &f) != 0 || !resolve_path(id, "path", f.path, f.path_len, FOLLOW_LAST, &r))
		return;
	struct download *d = NULL;
	for (int i = 0; i < MAX_READS && !d; i++)
		if (!reads[i].used)
			d = &reads[i];
	int fd = r.name[0] ? openat(r.dirfd, r.name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC) : -1;
	int err = fd >= 0 ? 0 : r.name[0] ? errno : EISDIR;
	struct stat st;
	const char *why = NULL;
	if (fd < 0)
		why = err == ENOENT ? "no such file" : err == EISDIR ? "is a directory" : strerror(err);
	else if (fstat(fd, &st) != 0)
		why = strerror(errno);
	else if (S_ISDIR(st.st_mode))
		why = "is a directory";
	else if (!S_ISREG(st.st_mode))
		why = "is not a regular file (device files, FIFOs and sockets are refused)";
	if (why || !d) {
		if (!d)
			send_error(id, "BUSY", NULL, "%d reads are under way already", MAX_READS);
		else
			send_error(id, err == ENOENT ? "NOT_FOUND" : "INVALID_REQUEST", "path", "%s: %s", r.rel[0] ? r.rel : ".", why);
		if (fd >= 0)
			close(fd);
		close(r.dirfd);
		return;
	}
	unsigned long long max = f.have_max ? f.max : 0;
	if ((unsigned long long)st.st_size > max) {
		send_error(id, "TOO_LARGE", "path", "%s is %lld bytes: over the download limit of %llu bytes", r.rel,
			   (long long)st.st_size, max);
		close(fd);
		close(r.dirfd);
		return;
	}
	struct jbuf b = {0};
	entry_json(&b, r.rel, strlen(r.rel), &st);
	send_json('H', id, &b);
	close(r.dirfd);
	*d = (struct download){1, id, fd, f.bulk, (unsigned long long)st.st_size, 0, f.credit};
}

void file_read_credit(uint32_t id, const char *body, size_t len)
{
	struct fields f;
	if (parse_fields(id, body, len, &f) != 0)
		return;
	for (int i = 0; i < MAX_READS; i++)
		if (reads[i].used && reads[i].id == id)
			reads[i].credit += f.credit;
}

int file_reads_pending(void)
{
	for (int i = 0; i < MAX_READS; i++)
		if (reads[i].used && (reads[i].credit > 0 || reads[i].left == 0))
			return 1;
	return 0;
}

/* The next piece of a read, at most `want` bytes: as one bulk record, or as PIPE_BUF records. */
static ssize_t read_piece(struct download *d, size_t want)
{
	static char buf[16 * REC_DATA];
	if (d->bulk) {
		want = want < BULK_REC_DATA ? want : BULK_REC_DATA;
		ssize_t n = read(d->fd, bulk_begin(want), want);
		if (n > 0)
			bulk_commit('d', d->id, (size_t)n);
		return n;
	}
	want = want < sizeof buf ? want : sizeof buf;
	ssize_t n = read(d->fd, buf, want);
	if (n > 0)
		send_data('d', d->id, buf, (size_t)n);
	return n;
}

void file_pump_reads(void)
{
	for (int i = 0; i < MAX_READS; i++) {
		struct download *d = &reads[i];
		while (d->used && (d->credit > 0 || d->left == 0) && !outq_full()) {
			size_t want = d->left < d->credit ? (size_t)d->left : (size_t)d->credit;
			ssize_t n = want ? read_piece(d, want) : 0;
			if (n < 0 && errno == EINTR)
				continue;
			if (n > 0) {
				d->left -= (size_t)n;
				d->sent += (size_t)n;
				d->credit -= (size_t)n;
				continue;
			}
			/* The whole size read (it is never more than it was when opened), or the file shrank. */
			struct jbuf b = {0};
			if (n < 0)
				send_error(d->id, "INTERNAL", "path", "read failed: %s", strerror(errno));
			else {
				jb_fmt(&b, "{\"bytes\":%llu}", d->sent);
				send_json('A', d->id, &b);
			}
			close(d->fd);
			d->used = 0;
		}
	}
}

int file_cancel(uint32_t id)
{
	struct upload *u = find_upload(id);
	if (u) {
		drop_upload(u);
		return 1;
	}
	for (int i = 0; i < MAX_READS; i++)
		if (reads[i].used && reads[i].id == id) {
			close(reads[i].fd);
			reads[i].used = 0;
			return 1;
		}
	return 0;
}

void file_abort_transfers(void)
{
	for (int i = 0; i < MAX_UPLOADS; i++)
		if (uploads[i].used)
			drop_upload(&uploads[i]);
	for (int i = 0; i < MAX_READS; i++)
		if (reads[i].used) {
			close(reads[i].fd);
			reads[i].used = 0;
		}
}

/* --- listing --- */

struct listing {
	uint32_t id, max;
	uint32_t count;
	struct jbuf batch;
	int over;
};

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void list_add(struct listing *l, const char *rel, const struct stat *st)
{
	if (l->count >= l->max) {
		l->over = 1;
		return;
	}
	jb_lit(&l->batch, l->batch.len > 1 ? "," : "");
	entry_json(&l->batch, rel, strlen(rel), st);
	l->count++;
	if (l->batch.len >= LIST_BATCH) {
		jb_lit(&l->batch, "]");
		send_json('l', l->id, &l->batch);
		jb_lit(&l->batch, "[");
	}
}

/* Lists directory `fd` (rel: its path); recurses into subdirectories, never through symlinks. */
static void list_dir(struct listing *l, int fd, const char *rel, int recursive, int depth)
{
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			char **grown = realloc(names, cap * sizeof *names);
			if (!grown)
				break;
			names = grown;
		}
		names[n] = strdup(de->d_name);
		if (names[n])
			n++;
	}
	qsort(names, n, sizeof *names, by_name);
	int dfd = dirfd(d);
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		char child[sizeof ((struct resolved *)0)->rel + 256];
		snprintf(child, sizeof child, "%s%s%s", rel, rel[0] ? "/" : "", names[i]);
		if (!l->over && fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) == 0) {
			list_add(l, child, &st);
			if (recursive && S_ISDIR(st.st_mode) && depth < MAX_DEPTH && strlen(child) < MAX_PATH) {
				int sub = openat(dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				if (sub >= 0)
					list_dir(l, sub, child, 1, depth + 1);
			}
		}
		free(names[i]);
	}
	free(names);
	closedir(d);
}

void file_list(uint32_t id, const char *body, size_t len)
{
	struct fields f;
	struct resolved r;
	if (parse_fields(id, body, len, &f) != 0 || !resolve_path(id, "path", f.path, f.path_len, FOLLOW_LAST, &r))
		return;
	struct listing l = {id, f.entries ? f.entries : 100000, 0, {0}, 0};
	jb_lit(&l.batch, "[");
	struct stat st;
	if (r.name[0] && fstatat(r.dirfd, r.name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		send_error(id, errno == ENOENT ? "NOT_FOUND" : "INTERNAL", "path", "%s: %s", r.rel, strerror(errno));
	} else if (r.name[0] && !S_ISDIR(st.st_mode)) {
		list_add(&l, r.rel, &st);
	} else {
		int fd = openat(r.dirfd, r.name[0] ? r.name : ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			send_error(id, "INVALID_REQUEST", "path", "%s: %s", r.rel, strerror(errno));
		else
			list_dir(&l, fd, r.rel, f.recursive, 0);
	}
	close(r.dirfd);
	if (l.over) {
		jb_free(&l.batch);
		return send_error(id, "TOO_LARGE", "path", "over %u entries; list a subdirectory", l.max);
	}
	jb_lit(&l.batch, "]");
	if (l.batch.len > 2)
		send_json('l', id, &l.batch);
	else
		jb_free(&l.batch);
	struct jbuf b = {0};
	jb_fmt(&b, "{\"count\":%u}", l.count);
	send_json('A', id, &b);
}

/* --- remove, mkdir --- */

static int remove_tree(int parent, const char *name, int depth)
{
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -1;
	}
	struct dirent *de;
	int rc = 0;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		if (S_ISDIR(st.st_mode) ? depth >= MAX_DEPTH || remove_tree(dirfd(d), de->d_name, depth + 1) != 0
					: unlinkat(dirfd(d), de->d_name, 0) != 0)
			rc = -1;
	}
	closedir(d);
	return rc == 0 ? unlinkat(parent, name, AT_REMOVEDIR) : -1;
}

void file_remove(uint32_t id, const char *body, size_t len)
{
	struct fields f;
	struct resolved r;
	if (parse_fields(id, body, len, &f) != 0)
		return;
	if (f.path_len == 0)
		return send_error(id, "INVALID_REQUEST", "path", "the workspace itself cannot be removed");
	if (!resolve_path(id, "path", f.path, f.path_len, 0, &r))
		return;
	struct stat st;
	int rc;
	if (!r.name[0]) {
		send_error(id, "INVALID_REQUEST", "path", "the workspace itself cannot be removed");
		close(r.dirfd);
		return;
	}
	if (fstatat(r.dirfd, r.name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		rc = -1;
	else if (S_ISDIR(st.st_mode))
		rc = f.recursive ? remove_tree(r.dirfd, r.name, 0) : unlinkat(r.dirfd, r.name, AT_REMOVEDIR);
	else
		rc = unlinkat(r.dirfd, r.name, 0);
	int err = errno;
	close(r.dirfd);
	if (rc != 0)
		return send_error(id, err == ENOENT ? "NOT_FOUND" : "INVALID_REQUEST", "path", "%s: %s", r.rel,
				  err == ENOTEMPTY ? "the directory is not empty; remove it recursively" : strerror(err));
	send_msg('A', id, "{}", 2);
}

void file_mkdir(uint32_t id, const char *body, size_t len)
{
	struct fields f;
	struct resolved r;
	if (parse_fields(id, body, len, &f) != 0 ||
	    !resolve_path(id, "path", f.path, f.path_len, FOLLOW_LAST | MAKE_PARENTS, &r))
		return;
	struct stat st;
	if (r.name[0] && mkdirat(r.dirfd, r.name, 0755) != 0 &&
	    (errno != EEXIST || fstatat(r.dirfd, r.name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))) {
		send_error(id, "INVALID_REQUEST", "path", "%s: %s", r.rel, errno == EEXIST ? "exists and is not a directory" : strerror(errno));
	} else {
		reply_entry(id, r.dirfd, r.name, r.rel);
	}
	close(r.dirfd);
}

/* --- watches (inotify) --- */

#define WATCH_MASK                                                                                                  \
	(IN_CLOSE_WRITE | IN_MODIFY | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | \
	 IN_MOVE_SELF)

struct wdesc {
	int wd;
	char *rel;
};
struct watch {
	int used;
	uint32_t id;
	char *prefix;
	int dir;
};
struct pending {
	uint32_t id;
	char *path;
	int removed;
};

static int ino_fd = -1;
static struct wdesc wds[MAX_WDS];
static int n_wds;
static struct watch watches[MAX_WATCHES];
static struct pending pend[64];
static int n_pend;
static long long pend_since;

int watch_fd(void)
{
	return ino_fd;
}

/* Watches the directory `fd` (rel: its path) through its /proc/self/fd link: exactly that inode. */
static void add_wd(int fd, const char *rel)
{
	char link[64];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	if (n_wds >= MAX_WDS)
		return;
	int wd = inotify_add_watch(ino_fd, link, WATCH_MASK | IN_ONLYDIR);
	if (wd < 0)
		return;
	for (int i = 0; i < n_wds; i++)
		if (wds[i].wd == wd)
			return;
	wds[n_wds].wd = wd;
	wds[n_wds].rel = strdup(rel);
	if (wds[n_wds].rel)
		n_wds++;
}

static void add_tree(int fd, const char *rel, int depth)
{
	add_wd(fd, rel);
	int rd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = rd >= 0 ? fdopendir(rd) : NULL;
	if (!d) {
		if (rd >= 0)
			close(rd);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d)) && n_wds < MAX_WDS && depth < 32) {
		struct stat st;
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    (de->d_type != DT_DIR && (de->d_type != DT_UNKNOWN || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
					      !S_ISDIR(st.st_mode))))
			continue;
		char child[sizeof ((struct resolved *)0)->rel + 256];
		snprintf(child, sizeof child, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
		int sub = openat(dirfd(d), de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0) {
			add_tree(sub, child, depth + 1);
			close(sub);
		}
	}
	closedir(d);
}

void watch_add(uint32_t id, const char *body, size_t len)
{
	struct fields f;
	struct resolved r;
	if (parse_fields(id, body, len, &f) != 0 || !resolve_path(id, "path", f.path, f.path_len, FOLLOW_LAST, &r))
		return;
	struct watch *w = NULL;
	for (int i = 0; i < MAX_WATCHES && !w; i++)
		if (!watches[i].used)
			w = &watches[i];
	if (ino_fd < 0)
		ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	struct stat st;
	int dir = 1;
	if (r.name[0] && fstatat(r.dirfd, r.name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		send_error(id, errno == ENOENT ? "NOT_FOUND" : "INTERNAL", "path", "%s: %s", r.rel, strerror(errno));
	} else if (!w || ino_fd < 0) {
		send_error(id, "BUSY", NULL, "no more watches: %s", ino_fd < 0 ? strerror(errno) : "64 at most");
	} else {
		dir = !r.name[0] || S_ISDIR(st.st_mode);
		if (dir) {
			int fd = r.name[0] ? openat(r.dirfd, r.name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
					   : fcntl(r.dirfd, F_DUPFD_CLOEXEC, 0);
			if (fd >= 0) {
				add_tree(fd, r.rel, 0);
				close(fd);
			}
		} else {
			/* A file: its directory, so that a file replaced by rename is still seen. */
			char parent[sizeof r.rel];
			strcpy(parent, r.rel);
			canon_pop(parent, NULL);
			add_wd(r.dirfd, parent);
		}
		*w = (struct watch){1, id, strdup(r.rel), dir};
		send_msg('A', id, "{}", 2);
	}
	close(r.dirfd);
}

void watch_remove(uint32_t id)
{
	int left = 0;
	for (int i = 0; i < MAX_WATCHES; i++) {
		if (watches[i].used && watches[i].id == id) {
			free(watches[i].prefix);
			watches[i].used = 0;
		}
		left += watches[i].used;
	}
	if (!left)
		watch_clear();
}

void watch_clear(void)
{
	for (int i = 0; i < MAX_WATCHES; i++)
		if (watches[i].used) {
			free(watches[i].prefix);
			watches[i].used = 0;
		}
	for (int i = 0; i < n_wds; i++)
		free(wds[i].rel);
	n_wds = 0;
	for (int i = 0; i < n_pend; i++)
		free(pend[i].path);
	n_pend = 0;
	if (ino_fd >= 0)
		close(ino_fd);
	ino_fd = -1;
}

static int covers(const struct watch *w, const char *path)
{
	size_t n = strlen(w->prefix);
	if (strcmp(path, w->prefix) == 0)
		return 1;
	return w->dir && (n == 0 || (strncmp(path, w->prefix, n) == 0 && path[n] == '/'));
}

void watch_flush(long long now)
{
	if (n_pend == 0 || (now && now < pend_since + WATCH_COALESCE_MS))
		return;
	for (int i = 0; i < n_pend; i++) {
		struct jbuf b = {0};
		jb_lit(&b, "{\"path\":");
		jb_str(&b, pend[i].path, strlen(pend[i].path));
		jb_fmt(&b, ",\"kind\":\"%s\"}", pend[i].removed ? "removed" : "changed");
		send_json('w', pend[i].id, &b);
		free(pend[i].path);
	}
	n_pend = 0;
}

long long watch_next_flush(void)
{
	return n_pend ? pend_since + WATCH_COALESCE_MS : 0;
}

static void queue_change(uint32_t id, const char *path, int removed)
{
	for (int i = 0; i < n_pend; i++)
		if (pend[i].id == id && strcmp(pend[i].path, path) == 0) {
			pend[i].removed = removed;
			return;
		}
	if (n_pend == (int)(sizeof pend / sizeof *pend))
		watch_flush(0);
	if (n_pend == 0)
		pend_since = now_ms();
	pend[n_pend].path = strdup(path);
	if (pend[n_pend].path) {
		pend[n_pend].id = id;
		pend[n_pend++].removed = removed;
	}
}

static void new_subdir(const char *rel)
{
	struct resolved r;
	if (!resolve_path(0, "path", rel, strlen(rel), QUIET, &r))
		return;
	int fd = openat(r.dirfd, r.name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		add_tree(fd, r.rel, 0);
		close(fd);
	}
	close(r.dirfd);
}

void watch_on_events(void)
{
	static char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n;
	while ((n = read(ino_fd, buf, sizeof buf)) > 0) {
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)p;
			p += sizeof *ev + ev->len;
			const char *rel = NULL;
			for (int i = 0; i < n_wds && !rel; i++)
				if (wds[i].wd == ev->wd)
					rel = wds[i].rel;
			if (ev->mask & IN_Q_OVERFLOW) {
				for (int i = 0; i < MAX_WATCHES; i++)
					if (watches[i].used)
						queue_change(watches[i].id, watches[i].prefix, 0);
				continue;
			}
			if (!rel || (ev->mask & IN_IGNORED))
				continue;
			char path[sizeof ((struct resolved *)0)->rel + 256];
			snprintf(path, sizeof path, "%s%s%s", rel, rel[0] && ev->len ? "/" : "", ev->len ? ev->name : "");
			int removed = (ev->mask & (IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF)) != 0;
			for (int i = 0; i < MAX_WATCHES; i++)
				if (watches[i].used && covers(&watches[i], path))
					queue_change(watches[i].id, path, removed);
			if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) && (ev->mask & IN_ISDIR))
				new_subdir(path);
		}
	}
}
