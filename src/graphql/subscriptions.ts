import { ErrorCode, GatewayError } from '../errors.js';
import { CursorError, type Position } from '../events/index.js';
import type { GraphQLContext } from './context.js';

/**
 * `watch` called with the position a stream resumes after: its `after` argument, else (over SSE) the request's
 * Last-Event-ID; undefined for neither, and then `watch` is called at once (a subscribe without a cursor reads nothing
 * more). A cursor this gateway did not hand out, one older than EVENT_RETENTION, or one before events the retention
 * purge has deleted is BAD_USER_INPUT on `after` naming why, and nothing is streamed: a resume never skips silently.
 */
export function resumeAfter<T>(
  after: string | null | undefined,
  ctx: GraphQLContext,
  watch: (position: Position | undefined) => T,
): T | Promise<Awaited<T>> {
  const cursor = after ?? ctx.lastEventId;
  if (cursor == null) return watch(undefined);
  // The refusal names where the cursor came from: the argument, or the header an EventSource sent back.
  const field = after != null ? 'after' : 'Last-Event-ID';
  const resumed = async (): Promise<Awaited<T>> => {
    let position: Position;
    try {
      position = await ctx.services.events.position(cursor);
    } catch (err) {
      if (!(err instanceof CursorError)) throw err;
      const retention = ctx.services.events.log.retentionMs;
      throw new GatewayError(ErrorCode.BAD_USER_INPUT, `${field}: ${err.message}`, {
        field,
        reason: err.reason,
        ...(err.reason === 'expired' ? { retentionMs: retention } : {}),
      });
    }
    return await watch(position);
  };
  return resumed();
}
