/*
 * Output files of a one-shot run: see outputs.h.
 *
 * Confinement. An entry that is absolute or holds a '..' segment names nothing in the workspace.
 * Every other one is resolved with realpath(3), and a file whose real path is not beneath the
 * workspace (a symlink, or a symlinked directory on the way, that leads out) is named and not
 * read. Nothing can change the workspace meanwhile: the program and every process it left are
 * gone (the caller makes sure of it), so what realpath saw is what open(O_NOFOLLOW) opens.
 *
 * Globs. An entry's segments are matched one directory at a time with fnmatch(FNM_PERIOD) (so
 * `*` does not match a leading dot), and `**` matches any number of directories (hidden ones
 * not). A glob never descends into a symlinked directory, and skips what is not a regular file;
 * it looks at MAX_SCAN directory entries at most. Matches are taken in name order.
 *
 * Caps. Files are collected in the order their entries and matches came until `max_files` are,
 * each while the bytes so far stay within `max_bytes`; every file past a cap is named with it (the
 * first MAX_SKIPS skips one by one, the rest counted by reason), never dropped silently.
 */
#define _GNU_SOURCE
#include "outputs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SEGMENTS 16 /* as deep as a returned path may be (src/api/run.ts isSafeRelativePath) */
#define MAX_NAME 255    /* as long as a returned path may be, in bytes */
#define MAX_SCAN 10000  /* directory entries all globs look at together */
#define MAX_CANDIDATES 1024
#define MAX_SKIPS 64
#define N_REASONS 9

struct candidate {
	char *rel, *real;
};

static char ws[PATH_MAX];
static size_t ws_len;
static struct candidate cands[MAX_CANDIDATES];
static int n_cands;
static long cands_over; /* matches past MAX_CANDIDATES: past every cap on files */
static const struct output_sink *out;
static int n_skips;
static long skips_over[N_REASONS];
static long scanned;

static void skip(enum skip_reason reason, const char *entry, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void skip(enum skip_reason reason, const char *entry, const char *fmt, ...)
{
	if (n_skips >= MAX_SKIPS) {
		skips_over[reason]++;
		return;
	}
	n_skips++;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	out->skip(reason, entry, msg);
}

static const char *size_text(uint64_t bytes, char *buf, size_t len)
{
	if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
		snprintf(buf, len, "%llu MiB", (unsigned long long)(bytes >> 20));
	else if (bytes >= (1u << 10) && bytes % (1u << 10) == 0)
		snprintf(buf, len, "%llu KiB", (unsigned long long)(bytes >> 10));
	else
		snprintf(buf, len, "%llu bytes", (unsigned long long)bytes);
	return buf;
}

/* A path the gateway takes as it is: UTF-8, no control characters or backslashes, short, shallow. */
static int name_ok(const char *rel)
{
	size_t n = strlen(rel);
	int segments = 1;
	if (n == 0 || n > MAX_NAME)
		return 0;
	for (const unsigned char *p = (const unsigned char *)rel; *p;) {
		if (*p < 0x20 || *p == 0x7f || *p == '\\')
			return 0;
		segments += *p == '/';
		if (*p < 0x80) {
			p++;
			continue;
		}
		int len = *p >= 0xc2 && *p <= 0xdf ? 2 : *p >= 0xe0 && *p <= 0xef ? 3 : *p >= 0xf0 && *p <= 0xf4 ? 4 : 0;
		if (len == 0)
			return 0;
		for (int i = 1; i < len; i++)
			if ((p[i] & 0xc0) != 0x80)
				return 0;
		if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0) || (p[0] == 0xf0 && p[1] < 0x90) ||
		    (p[0] == 0xf4 && p[1] >= 0x90))
			return 0; /* overlong, a surrogate, or past U+10FFFF */
		p += len;
	}
	return segments <= MAX_SEGMENTS;
}

/* The absolute path of workspace path `rel` in `buf` (PATH_MAX); -1 when it does not fit. */
static int full_path(char *buf, const char *rel)
{
	size_t n = strlen(rel);
	if (ws_len + 1 + n >= PATH_MAX)
		return -1;
	memcpy(buf, ws, ws_len);
	buf[ws_len] = '/';
	memcpy(buf + ws_len + 1, rel, n + 1);
	return 0;
}

static int beneath_ws(const char *real)
{
	if (ws_len == 1)
		return real[1] != 0; /* the workspace is / */
	return strncmp(real, ws, ws_len) == 0 && real[ws_len] == '/';
}

static void add_candidate(const char *rel, const char *real)
{
	for (int i = 0; i < n_cands; i++)
		if (strcmp(cands[i].rel, rel) == 0)
			return;
	if (n_cands >= MAX_CANDIDATES) {
		cands_over++;
		return;
	}
	cands[n_cands].rel = strdup(rel);
	cands[n_cands].real = strdup(real);
	if (cands[n_cands].rel && cands[n_cands].real)
		n_cands++;
}

/* What one entry matched: files, things that are not, and matches named as not collected. */
struct tally {
	int files, others, named;
};

/*
 * Takes the file at workspace path `rel` when it is one (`literal`: the entry named it, so what it
 * is not is said). Returns 0 when nothing is there.
 */
static int consider(const char *rel, int literal, struct tally *t)
{
	char full[PATH_MAX], real[PATH_MAX];
	struct stat st;
	if (full_path(full, rel) != 0) {
		skip(SKIP_BAD_NAME, rel, "the path is too long");
		return 1;
	}
	if (lstat(full, &st) != 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		skip(SKIP_UNREADABLE, rel, "%s", strerror(errno));
		t->named++;
		return 1;
	}
	if (!realpath(full, real)) {
		t->named++;
		char target[PATH_MAX];
		ssize_t n = S_ISLNK(st.st_mode) ? readlink(full, target, sizeof target - 1) : -1;
		target[n > 0 ? n : 0] = 0;
		if (n > 0 && target[0] == '/' && !beneath_ws(target))
			skip(SKIP_OUTSIDE, rel, "a symlink that leads out of the workspace (to %s)", target);
		else
			skip(SKIP_NO_MATCH, rel, "a symlink to %s, which does not exist", n > 0 ? target : "nothing");
		return 1;
	}
	if (!beneath_ws(real)) {
		t->named++;
		skip(SKIP_OUTSIDE, rel, "a symlink that leads out of the workspace (to %s)", real);
		return 1;
	}
	if (stat(real, &st) != 0) {
		t->named++;
		skip(SKIP_UNREADABLE, rel, "%s", strerror(errno));
		return 1;
	}
	if (!S_ISREG(st.st_mode)) {
		t->others++;
		if (literal)
			skip(SKIP_NOT_FILE, rel, S_ISDIR(st.st_mode) ? "a directory: name its files, e.g. %s/*" : "not a regular file%.0s", rel);
		return 1;
	}
	if (!name_ok(rel)) {
		t->named++;
		skip(SKIP_BAD_NAME, rel, "the name is not UTF-8, holds control characters or a backslash, or is over %d bytes or %d deep",
		     MAX_NAME, MAX_SEGMENTS);
		return 1;
	}
	t->files++;
	add_candidate(rel, real);
	return 1;
}

struct walk {
	char *segs[MAX_SEGMENTS + 1];
	int n;
	const char *entry;
	struct tally tally;
	int stopped;
};

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in workspace directory `rel`, sorted; NULL when it cannot be read. */
static char **list_dir(struct walk *w, const char *rel, int *count)
{
	char full[PATH_MAX];
	DIR *d = full_path(full, rel) == 0 ? opendir(full) : NULL;
	if (!d)
		return NULL;
	char **names = NULL;
	int n = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (++scanned > MAX_SCAN) {
			if (!w->stopped)
				skip(SKIP_SEARCH, w->entry, "the search stopped after %d entries of the workspace: name the files more narrowly",
				     MAX_SCAN);
			w->stopped = 1;
			break;
		}
		if (n == cap) {
			char **grown = realloc(names, (size_t)(cap = cap ? 2 * cap : 64) * sizeof *names);
			if (!grown)
				break;
			names = grown;
		}
		if ((names[n] = strdup(e->d_name)))
			n++;
	}
	closedir(d);
	if (n)
		qsort(names, (size_t)n, sizeof *names, by_name);
	*count = n;
	return names;
}

/* `dir/name` (or `name` in the workspace itself) in `buf`; -1 when it does not fit. */
static int join(char *buf, size_t len, const char *dir, const char *name)
{
	return (size_t)snprintf(buf, len, "%s%s%s", dir, dir[0] ? "/" : "", name) < len ? 0 : -1;
}

/* A directory of the workspace, not a symlink to one. */
static int real_dir(const char *rel)
{
	char full[PATH_MAX];
	struct stat st;
	return full_path(full, rel) == 0 && lstat(full, &st) == 0 && S_ISDIR(st.st_mode);
}

static int depth(const char *rel)
{
	int d = rel[0] != 0;
	for (const char *p = rel; *p; p++)
		d += *p == '/';
	return d;
}

/* Matches segment k (and those after it) of the entry in workspace directory `dir`. */
static void match(struct walk *w, const char *dir, int k)
{
	const char *seg = w->segs[k];
	int last = k == w->n - 1, globstar = strcmp(seg, "**") == 0;
	char rel[PATH_MAX];
	if (w->stopped || depth(dir) >= MAX_SEGMENTS)
		return;
	if (!globstar && !strpbrk(seg, "*?[")) {
		if (join(rel, sizeof rel, dir, seg) != 0)
			return;
		if (last)
			consider(rel, 0, &w->tally);
		else if (real_dir(rel))
			match(w, rel, k + 1);
		return;
	}
	if (globstar && !last)
		match(w, dir, k + 1); /* no directory at all */
	int n = 0;
	char **names = list_dir(w, dir, &n);
	for (int i = 0; i < n; i++) {
		if (join(rel, sizeof rel, dir, names[i]) != 0) {
			free(names[i]);
			continue;
		}
		if (globstar) {
			if (last && names[i][0] != '.')
				consider(rel, 0, &w->tally);
			if (names[i][0] != '.' && real_dir(rel))
				match(w, rel, k); /* one directory more */
		} else if (fnmatch(seg, names[i], FNM_PERIOD) == 0) {
			if (last)
				consider(rel, 0, &w->tally);
			else if (real_dir(rel))
				match(w, rel, k + 1);
		}
		free(names[i]);
	}
	free(names);
}

static void collect_entry(const char *entry)
{
	if (entry[0] == '/') {
		skip(SKIP_OUTSIDE, entry, "an absolute path: give it relative to the workspace");
		return;
	}
	struct walk w = {.entry = entry};
	char copy[PATH_MAX];
	snprintf(copy, sizeof copy, "%s", entry);
	int magic = 0;
	for (char *s = strtok(copy, "/"); s; s = strtok(NULL, "/")) {
		if (strcmp(s, "..") == 0) {
			skip(SKIP_OUTSIDE, entry, "'..' leads out of the workspace");
			return;
		}
		if (strcmp(s, ".") == 0)
			continue;
		if (w.n == MAX_SEGMENTS) {
			skip(SKIP_BAD_NAME, entry, "deeper than %d directories", MAX_SEGMENTS);
			return;
		}
		magic |= strpbrk(s, "*?[") != NULL;
		w.segs[w.n++] = s;
	}
	if (w.n == 0) {
		skip(SKIP_NOT_FILE, entry, "the workspace itself: name its files, e.g. *");
		return;
	}
	if (!magic) {
		char rel[PATH_MAX] = "";
		for (int i = 0; i < w.n; i++) {
			if (i)
				strncat(rel, "/", sizeof rel - strlen(rel) - 1);
			strncat(rel, w.segs[i], sizeof rel - strlen(rel) - 1);
		}
		if (!consider(rel, 1, &w.tally))
			skip(SKIP_NO_MATCH, entry, "no such file in the workspace");
		return;
	}
	match(&w, "", 0);
	if (w.tally.files == 0 && w.tally.named == 0 && !w.stopped) {
		if (w.tally.others)
			skip(SKIP_NOT_FILE, entry, "it matches only directories or other things that are not files");
		else
			skip(SKIP_NO_MATCH, entry, "nothing in the workspace matches it");
	}
}

/* Reads the whole regular file at `real`; NULL with errno when it cannot. */
static char *read_whole(const char *real, size_t size, size_t *got)
{
	int fd = open(real, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	char *buf = malloc(size ? size : 1);
	size_t off = 0;
	while (buf && off < size) {
		ssize_t r = read(fd, buf + off, size - off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		off += (size_t)r;
	}
	close(fd);
	*got = off;
	return buf;
}

static void take(const struct candidate *c, struct output_caps caps, uint32_t *files, uint64_t *bytes)
{
	char a[32], b[32], c32[32];
	struct stat st;
	if (*files >= caps.max_files) {
		skip(SKIP_TOO_MANY, c->rel, "over the cap of %u files", caps.max_files);
		return;
	}
	if (stat(c->real, &st) != 0 || !S_ISREG(st.st_mode)) {
		skip(SKIP_UNREADABLE, c->rel, "it changed while it was collected");
		return;
	}
	if ((uint64_t)st.st_size > caps.max_bytes - *bytes) {
		skip(SKIP_TOO_LARGE, c->rel, "%s: over the cap of %s in all (%s collected before it)",
		     size_text((uint64_t)st.st_size, a, sizeof a), size_text(caps.max_bytes, b, sizeof b),
		     size_text(*bytes, c32, sizeof c32));
		return;
	}
	size_t got = 0;
	char *data = read_whole(c->real, (size_t)st.st_size, &got);
	if (!data) {
		skip(SKIP_UNREADABLE, c->rel, "%s", strerror(errno));
		return;
	}
	out->file(c->rel, data, got);
	free(data);
	*files += 1;
	*bytes += got;
}

static const char *const REASON_WORDS[N_REASONS] = {
	"", "lead out of the workspace", "match nothing", "are not files", "are over the cap on files",
	"are over the cap on bytes", "have names that cannot be returned", "were not searched", "could not be read",
};

void collect_outputs(char *const *entries, int n, struct output_caps caps, const struct output_sink *sink)
{
	out = sink;
	if (!realpath(".", ws)) {
		for (int i = 0; i < n; i++)
			skip(SKIP_UNREADABLE, entries[i], "the workspace cannot be read: %s", strerror(errno));
		return;
	}
	ws_len = strlen(ws);
	for (int i = 0; i < n; i++)
		collect_entry(entries[i]);
	uint32_t files = 0;
	uint64_t bytes = 0;
	for (int i = 0; i < n_cands; i++)
		take(&cands[i], caps, &files, &bytes);
	skips_over[SKIP_TOO_MANY] += cands_over;
	for (int r = 1; r < N_REASONS; r++) {
		if (!skips_over[r])
			continue;
		char entry[32], msg[128];
		snprintf(entry, sizeof entry, "(%ld more)", skips_over[r]);
		snprintf(msg, sizeof msg, "%ld more entries or files %s, past the %d named one by one", skips_over[r], REASON_WORDS[r],
			 MAX_SKIPS);
		out->skip((enum skip_reason)r, entry, msg);
	}
}
