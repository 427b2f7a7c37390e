// @ts-check
/* global process */
/**
 * A node:test reporter that writes one JSON line per test (not per suite): its file, the names of
 * the suites it is in, its own name, whether it passed, and the figures it recorded (see
 * test/support/figures.ts). test/run.sh adds it when SANDPIT_RESULTS_DIR is set, and
 * test/reliability/report.ts makes the reliability report from what it wrote. Plain JavaScript:
 * node loads reporters before tsx's hooks.
 */
import { relative } from 'node:path';

const FIGURE = 'figure ';

/**
 * The fields of node:test's events that this reporter reads.
 * @typedef {{ file?: string, nesting: number, name?: string, message?: string, skip?: unknown,
 *   todo?: unknown, details?: { type?: string, duration_ms?: number, error?: Error } }} EventData
 * @typedef {{ file: string, suites: string[], name: string, status: string, durationMs: number,
 *   error?: string, figures?: unknown[] }} TestRecord
 */

/**
 * @param {AsyncIterable<{ type: string, data: EventData }>} source
 * @returns {AsyncGenerator<string>}
 */
export default async function* resultsReporter(source) {
  // The names of the tests started at each nesting level: node reports a file's tests in order,
  // children before their suite, and the tiers this serves run one file at a time. (A test's
  // own file can differ from its suite's, where a helper in another file calls test().) The
  // record a following diagnostic belongs to is the last one: a test's figures come after its own
  // pass, so the records are written at the end.
  /** @type {string[]} */
  const started = [];
  /** @type {{ record: TestRecord, nesting: number } | undefined} */
  let last;
  /** @type {TestRecord[]} */
  const records = [];
  for await (const { type, data } of source) {
    const file = data.file ? relative(process.cwd(), data.file) : '';
    if (type === 'test:start') {
      started.length = data.nesting;
      started.push(data.name ?? '');
    } else if ((type === 'test:pass' || type === 'test:fail') && data.details?.type !== 'suite') {
      /** @type {TestRecord} */
      const record = {
        file,
        suites: started.slice(0, data.nesting),
        name: data.name ?? '',
        status:
          type === 'test:fail'
            ? 'fail'
            : data.skip !== undefined
              ? 'skip'
              : data.todo !== undefined
                ? 'todo'
                : 'pass',
        durationMs: Math.round(data.details?.duration_ms ?? 0),
        ...(data.details?.error ? { error: firstLine(data.details.error) } : {}),
      };
      records.push(record);
      last = { record, nesting: data.nesting };
    } else if (type === 'test:diagnostic' && data.message?.startsWith(FIGURE)) {
      if (last && last.nesting === data.nesting)
        (last.record.figures ??= []).push(
          /** @type {unknown} */ (JSON.parse(data.message.slice(FIGURE.length))),
        );
    }
  }
  for (const record of records) yield JSON.stringify(record) + '\n';
}

/** @param {Error} error */
function firstLine(error) {
  const cause = /** @type {{ cause?: unknown }} */ (error).cause;
  const message = cause instanceof Error ? cause.message : error.message;
  return (message.split('\n')[0] ?? '').slice(0, 300);
}
