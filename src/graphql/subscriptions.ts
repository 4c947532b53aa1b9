import { ErrorCode, GatewayError } from '../errors.js';
import { CursorError, type Position } from '../events/index.js';
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
