/*
 * Output files of a one-shot run (protocol 5): once the program and every process it left have
 * ended, the files its job's `outputs` entries name (workspace paths or globs) are collected,
 * confined to the workspace, within the job's caps, and handed to a sink: each file whole, and
 * each entry or file that is not collected with its reason. src/runner/protocol.ts reads them.
 */
#ifndef SANDPIT_OUTPUTS_H
#define SANDPIT_OUTPUTS_H

#include <stddef.h>
#include <stdint.h>

/* Why an entry or a file is not collected: src/api/outputs.ts SKIP_REASONS, counted from 1. */
enum skip_reason {
	SKIP_OUTSIDE = 1,   /* an absolute path, a '..', a symlink out of the workspace */
	SKIP_NO_MATCH = 2,  /* nothing matches it */
	SKIP_NOT_FILE = 3,  /* a directory, FIFO, device or socket */
	SKIP_TOO_MANY = 4,  /* past the cap on files */
	SKIP_TOO_LARGE = 5, /* past the cap on bytes */
	SKIP_BAD_NAME = 6,  /* not UTF-8, control characters, too long or too deep */
	SKIP_SEARCH = 7,    /* the search for a glob stopped at its bound */
	SKIP_UNREADABLE = 8,
};

struct output_sink {
	/* A collected file: its workspace-relative path and all its bytes. */
	void (*file)(const char *path, const char *data, size_t len);
	void (*skip)(enum skip_reason reason, const char *entry, const char *message);
};

struct output_caps {
	uint32_t max_files;
	uint32_t max_bytes;
};

/*
 * Collects the files `entries` name in the current directory (the workspace). Call it only once
 * no process of the program is left: nothing may change the workspace while it looks.
 */
void collect_outputs(char *const *entries, int n, struct output_caps caps, const struct output_sink *sink);

#endif
