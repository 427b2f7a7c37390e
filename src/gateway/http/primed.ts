/**
 * A streamed body whose first chunk is read before the status is sent: a failure before any byte
 * (a path the sandbox refuses) is still an error answer with its status and JSON, not a 200 whose
 * connection is cut.
 */
export async function primed(source: AsyncIterable<Buffer>): Promise<AsyncIterable<Buffer>> {
  const it = source[Symbol.asyncIterator]();
  let pending: IteratorResult<Buffer> | undefined = await it.next();
  const rest: AsyncIterableIterator<Buffer> = {
    [Symbol.asyncIterator]: () => rest,
    next: () => {
      const first = pending;
      pending = undefined;
      return first ? Promise.resolve(first) : it.next();
    },
    // A client that goes away before the first chunk was taken still closes the source.
    return: async () => {
      pending = undefined;
      await it.return?.();
      return { done: true, value: undefined };
    },
  };
  return rest;
}
