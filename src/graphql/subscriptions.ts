import { ErrorCode, GatewayError } from '../errors.js';
import { CursorError, type Resume } from '../events/index.js';
import type { GraphQLContext } from './context.js';

/**
 * Where a stream resumes: after its `after` argument, else (over SSE) the request's Last-Event-ID; undefined for
 * neither. A cursor this gateway did not hand out, or one older than EVENT_RETENTION, is BAD_USER_INPUT on `after`
 * naming why, and nothing is streamed: a resume never skips silently. One before events the retention purge has
 * deleted is found by the stream's replay, which reads the log (and waits out a database that is away): it ends the
 * stream with the same BAD_USER_INPUT (`refused`), before any event; or after the events of the pages read before,
 * when the purge deletes what the replay had still to read (their cursors resume into the same refusal).
 */
export function resumeAfter(after: string | null | undefined, ctx: GraphQLContext): Resume | undefined {
  const cursor = after ?? ctx.lastEventId;
  if (cursor == null) return undefined;
  // The refusal names where the cursor came from: the argument, or the header an EventSource sent back.
  const field = after != null ? 'after' : 'Last-Event-ID';
  const refused = (err: CursorError): GatewayError =>
    new GatewayError(ErrorCode.BAD_USER_INPUT, `${field}: ${err.message}`, {
      field,
      reason: err.reason,
      ...(err.reason === 'expired' ? { retentionMs: ctx.services.events.log.retentionMs } : {}),
    });
  try {
    return { ...ctx.services.events.resume(cursor), refused };
  } catch (err) {
    if (!(err instanceof CursorError)) throw err;
    throw refused(err);
  }
}
