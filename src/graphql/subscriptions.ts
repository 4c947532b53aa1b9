import { ErrorCode, GatewayError } from '../errors.js';
import { CursorError, StreamCancel, type Position } from '../events/index.js';
import type { GraphQLContext } from './context.js';

/**
 * The position a stream resumes after: its `after` argument, else (over SSE) the request's Last-Event-ID; undefined
 * for neither. A cursor this gateway did not hand out, or one older than EVENT_RETENTION, is BAD_USER_INPUT on `after`
 * naming why, and nothing is streamed: a resume never skips silently.
 */
export function resumeAfter(after: string | null | undefined, ctx: GraphQLContext): Position | undefined {
  const cursor = after ?? ctx.lastEventId;
  if (cursor == null) return undefined;
  // The refusal names where the cursor came from: the argument, or the header an EventSource sent back.
  const field = after != null ? 'after' : 'Last-Event-ID';
  try {
    return ctx.services.events.position(cursor);
  } catch (err) {
    if (!(err instanceof CursorError)) throw err;
    const retention = ctx.services.events.log.retentionMs;
    throw new GatewayError(ErrorCode.BAD_USER_INPUT, `${field}: ${err.message}`, {
      field,
      reason: err.reason,
      ...(err.reason === 'expired' ? { retentionMs: retention } : {}),
    });
  }
}

/**
 * An async iterator whose `return()` (graphql-ws or SSE calls it when the client completes or disconnects)
 * aborts the stream at once, even while it waits for an event that may never come: an async generator
 * suspended in an await would otherwise finish its `return()` only when the next event arrives.
 */
export function abortable<T>(start: (signal: StreamCancel) => AsyncGenerator<T>): AsyncGenerator<T> {
  // Not an AbortController: an idle subscription holds this for hours, and a StreamCancel is lighter (decision 006).
  const controller = new StreamCancel();
  const inner = start(controller);
  const outer: AsyncGenerator<T> = {
    next: () => inner.next(),
    return: async (value?: unknown) => {
      controller.abort();
      return inner.return(value as never);
    },
    throw: async (err?: unknown) => {
      controller.abort();
      return inner.throw(err);
    },
    [Symbol.asyncIterator]: () => outer,
  };
  return outer;
}
