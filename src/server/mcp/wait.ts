// wait_for_events (docs/decisions/060, "Events as resources"): the resumable path for agents, now that the protocol
// has dropped SSE replay. It reads the app's own events from the durable log after a cursor, through the event reader
// (src/events/cursor-read.ts): owner-scoped, on any replica, until EVENT_RETENTION.
import { GraphQLError } from 'graphql';

import { expiredNow, onExpiry, type AuthExpiry } from '../../auth/jwt.js';
import type { AuthFailure } from '../../auth/keys.js';
import { ErrorCode } from '../../errors.js';
import type { LiveSubscriptions } from '../../ratelimit/live-subscriptions.js';
import { MAX_LISTENS_PER_APP } from './http.js';
import { errorsResult } from './operations.js';
import type { McpResources } from './resources.js';
import { toolError, type McpTool } from './server.js';

/** The longest wait_for_events may hold its request (the client's own request timeout must be longer). */
export const MAX_WAIT_SECONDS = 300;
const MAX_EVENTS = 100;
/**
 * The most wait_for_events calls one app holds waiting on one replica: the rule of subscriptions/listen
 * (MAX_LISTENS_PER_APP), since each holds a request and bus listeners open the same way. A call that would return at
 * once (timeoutSeconds 0) holds nothing and is not counted.
 */
export const MAX_WAITS_PER_APP = MAX_LISTENS_PER_APP;

/**
 * wait_for_events: the app's events after a cursor from the durable log; at once when there are some, else it waits
 * on the bus (any replica's events reach it) up to timeoutSeconds; and the cursor to pass next time. The resumable
 * path for agents: a cursor works on every replica, until EVENT_RETENTION. A call made with a JWT waits no longer than
 * the token lives (`expiry`: the rule and clock of graphql-ws, SSE and subscriptions/listen, src/auth/jwt.ts onExpiry).
 */
export function waitForEventsTool(resources: McpResources, expiry?: AuthExpiry, live?: LiveSubscriptions): McpTool {
  const kinds = resources.eventKinds;
  /** Calls waiting on this replica, by app (owner scope). */
  const waiting = new Map<string, number>();
  const bad = (argument: string, text: string, extra: Record<string, unknown> = {}) =>
    toolError(`Invalid argument ${argument}: ${text}; nothing was read`, {
      errors: [{ code: 'BAD_USER_INPUT', argument, ...extra }],
    });
  return {
    name: 'wait_for_events',
    title: 'Wait for events',
    description: [
      "Your app's events (verification and identification completions, mobile-ID results, provisioning steps) after a cursor, oldest first, from the gateway's durable event log.",
      'Returns at once when there are some; otherwise waits up to timeoutSeconds for the next one.',
      'Pass the returned cursor next time: nothing is missed or repeated, on any replica, for EVENT_RETENTION. Without a cursor it starts from now.',
      'Each event names its resource (uri): read it for the content.',
    ].join(' '),
    inputSchema: {
      type: 'object',
      properties: {
        cursor: { type: 'string', description: 'The cursor a previous call returned; absent: from now on.' },
        kinds: {
          type: 'array',
          items: { type: 'string', enum: kinds },
          minItems: 1,
          uniqueItems: true,
          description: 'The kinds of events to read; absent: every kind your scopes allow.',
        },
        timeoutSeconds: {
          type: 'integer',
          minimum: 0,
          maximum: MAX_WAIT_SECONDS,
          description: `How long to wait when no event is there yet (0 returns at once; at most ${MAX_WAIT_SECONDS}).`,
        },
      },
      required: ['timeoutSeconds'],
      additionalProperties: false,
    },
    outputSchema: {
      type: 'object',
      properties: {
        events: {
          type: 'array',
          items: {
            type: 'object',
            properties: {
              kind: { type: 'string', enum: kinds },
              key: { type: 'string' },
              uri: { type: 'string' },
              receivedAt: { type: 'string', format: 'date-time' },
              cursor: { type: 'string' },
            },
            required: ['kind', 'key', 'uri', 'receivedAt', 'cursor'],
          },
        },
        cursor: { type: 'string', description: 'Pass it as cursor next time.' },
        timedOut: { type: 'boolean', description: 'The wait ended with no event.' },
      },
      required: ['events', 'cursor', 'timedOut'],
    },
    annotations: {
      title: 'Wait for events',
      readOnlyHint: true,
      destructiveHint: false,
      idempotentHint: true,
      openWorldHint: false,
    },
    refusal: (caller) => {
      if (resources.readableKinds(caller).length > 0) return null;
      const first = resources.missingScope(caller, kinds[0] ?? '');
      return {
        message: `wait_for_events needs a read scope of some kind of event, which this app does not hold${first?.scope ? ` (for example ${first.scope})` : ''}; nothing was read`,
        scope: first?.scope,
      };
    },
    call: async (args, call) => {
      const extra = Object.keys(args).find((k) => !['cursor', 'kinds', 'timeoutSeconds'].includes(k));
      if (extra !== undefined) return bad(extra, 'wait_for_events takes cursor, kinds and timeoutSeconds');
      const { cursor, timeoutSeconds } = args as { cursor?: unknown; timeoutSeconds?: unknown };
      // Refused as the reader refuses every other text the gateway did not hand out, in its words (src/events/cursor.ts
      // CursorError); the reader would take '' for "from now on".
      if (cursor !== undefined && cursor !== null && (typeof cursor !== 'string' || !cursor))
        return bad('cursor', 'not a cursor this gateway handed out', { reason: 'malformed' });
      if (
        typeof timeoutSeconds !== 'number' ||
        !Number.isInteger(timeoutSeconds) ||
        timeoutSeconds < 0 ||
        timeoutSeconds > MAX_WAIT_SECONDS
      ) {
        return bad('timeoutSeconds', `a whole number of seconds from 0 to ${MAX_WAIT_SECONDS}`);
      }
      let wanted: string[];
      if (args.kinds === undefined || args.kinds === null) wanted = resources.readableKinds(call.caller);
      else {
        if (!Array.isArray(args.kinds) || args.kinds.length === 0)
          return bad('kinds', `a non-empty list of ${kinds.join(', ')}`);
        wanted = [];
        for (const [i, kind] of (args.kinds as unknown[]).entries()) {
          if (typeof kind !== 'string' || !kinds.includes(kind))
            return bad(`kinds.${i}`, `${JSON.stringify(kind)} is no kind of event (the kinds: ${kinds.join(', ')})`);
          const missing = resources.missingScope(call.caller, kind);
          if (missing)
            return toolError(
              `${kind} events need the scope ${missing.scope ?? 'to read them'}, which this app does not hold; nothing was read`,
              { code: 'FORBIDDEN', ...(missing.scope ? { scope: missing.scope } : {}) },
            );
          if (!wanted.includes(kind)) wanted.push(kind);
        }
      }
      const owner = call.caller.scope;
      const held = waiting.get(owner) ?? 0;
      if (timeoutSeconds > 0 && held >= MAX_WAITS_PER_APP)
        return toolError(
          `Wait limit reached: this app already has ${MAX_WAITS_PER_APP} wait_for_events calls waiting on this replica; wait for several kinds in one call, or call again with timeoutSeconds 0 (which returns at once); nothing was read`,
          { errors: [{ code: 'RATE_LIMITED', bound: 'mcp-waits:count', limit: MAX_WAITS_PER_APP }] },
        );
      // A call that waits is one of the app's live subscriptions (APP_LIVE_SUBSCRIPTIONS) while it waits.
      const taken = timeoutSeconds > 0 ? live?.take(call.caller) : undefined;
      if (taken instanceof GraphQLError) return errorsResult([taken.toJSON()]);
      if (timeoutSeconds > 0) waiting.set(owner, held + 1);
      // A wait made with a JWT ends when the token expires, as a stream opened with it does: what the reader found
      // before is answered, nothing logged after is read with it.
      const expiring = new AbortController();
      const cancelExpiry =
        timeoutSeconds > 0 ? onExpiry(expiry, call.caller, (reason) => expiring.abort(reason)) : () => undefined;
      // A reload that keeps the app but takes the scope of a kind the wait reads ends it FORBIDDEN naming the scope,
      // as graphql-ws and SSE end such a subscription, and as a call with that kind is refused from then on. Not
      // narrowed to the kinds left and waiting on: a call without kinds would then wait its whole timeout in silence
      // for a kind it was set up to read; ended, it is told why, and resumes from its cursor with nothing missed.
      const forbidden = new AbortController();
      const stopReadmitted =
        call.readmitted?.((caller) => {
          const kind = wanted.find((k) => resources.missingScope(caller, k));
          if (kind !== undefined) forbidden.abort({ kind, scope: resources.missingScope(caller, kind)!.scope });
        }) ?? (() => undefined);
      let page;
      const ends = [
        call.ctx.mcpReq.signal,
        expiring.signal,
        forbidden.signal,
        ...(call.revoked ? [call.revoked] : []),
        // At shutdown: answered as a wait that found nothing new, with its cursor, for the agent to call again.
        ...(call.stopping ? [call.stopping] : []),
      ];
      // Joined by hand, its listeners taken off when the call ends, not with AbortSignal.any: `stopping` lives as long
      // as the gateway, and AbortSignal.any leaves an entry on it for every call, which Node 20 never prunes (memory
      // held for good per call: an agent polling wait_for_events grew the gateway without bound).
      const ended = new AbortController();
      const end = (): void => ended.abort();
      for (const source of ends) {
        if (source.aborted) ended.abort();
        else source.addEventListener('abort', end, { once: true });
      }
      const signal = ended.signal;
      try {
        page = await resources.events.waitForEvents(call.caller, {
          cursor: cursor as string | undefined,
          kinds: wanted,
          timeoutSeconds,
          signal,
          limit: MAX_EVENTS,
        });
        // Found while a reload checks the credential: the events wait for its answer. Refused (or the wait ended
        // otherwise meanwhile: its kind's scope lost, the token expired, the gateway stopping), they are not handed
        // out: the call is answered as one that found nothing, from where they start, so that none is missed.
        const delivery = call.delivery;
        if (delivery?.held && page.events.length > 0) {
          await new Promise<void>((resolve) => {
            delivery.whenResumed(resolve);
            signal.addEventListener('abort', () => resolve(), { once: true });
          });
          if (delivery.held || signal.aborted) page = { ...page, events: [], cursor: page.since, timedOut: false };
        }
      } catch (err) {
        // A refusal of the reads budget (each call spends one point, as a GraphQL read does): RATE_LIMITED with retryAfter.
        if (err instanceof GraphQLError) return errorsResult([err.toJSON()]);
        const reason = (err as { reason?: unknown }).reason;
        if ((err as Error).name !== 'CursorError') throw err;
        return bad('cursor', (err as Error).message, { reason });
      } finally {
        for (const source of ends) source.removeEventListener('abort', end);
        cancelExpiry();
        stopReadmitted();
        taken?.();
        if (timeoutSeconds > 0) {
          const left = (waiting.get(owner) ?? 1) - 1;
          if (left > 0) waiting.set(owner, left);
          else waiting.delete(owner);
        }
      }
      // Ended by the expiry, or woken by an event after the token expired though its scheduled end had not run yet.
      const expired = expiring.signal.aborted
        ? (expiring.signal.reason as string)
        : timeoutSeconds > 0
          ? expiredNow(expiry, call.caller)
          : null;
      if (expired !== null && page.events.length === 0) {
        const message = `${expired} while waiting; nothing after it was read`;
        return toolError(
          `Unauthenticated: ${message}. Call again with a new token and the cursor ${page.cursor}: no event is missed`,
          { errors: [{ message, code: ErrorCode.UNAUTHENTICATED }], cursor: page.cursor },
        );
      }
      // A reload refused the credential meanwhile (as graphql-ws and SSE end what it opened): told as the expiry is.
      if (call.revoked?.aborted && page.events.length === 0) {
        const failure = call.revoked.reason as AuthFailure;
        const unavailable = failure.reason === 'unavailable';
        const message = `${failure.message} (the configuration was reloaded) while waiting; nothing after it was read`;
        const [word, again] = unavailable
          ? ['Unavailable', 'later']
          : ['Unauthenticated', 'with a credential the gateway accepts'];
        return toolError(`${word}: ${message}. Call again ${again} and the cursor ${page.cursor}: no event is missed`, {
          errors: [{ message, code: unavailable ? ErrorCode.UPSTREAM_UNAVAILABLE : ErrorCode.UNAUTHENTICATED }],
          cursor: page.cursor,
        });
      }
      if (forbidden.signal.aborted && page.events.length === 0) {
        const { kind, scope } = forbidden.signal.reason as { kind: string; scope: string | undefined };
        const message = `${kind} events need the scope ${scope ?? 'to read them'}, which this app no longer holds (the configuration was reloaded) while waiting; nothing after it was read`;
        return toolError(
          `Forbidden: ${message}. Call again with the cursor ${page.cursor} and the kinds this app may read: no event is missed`,
          { errors: [{ message, code: ErrorCode.FORBIDDEN, ...(scope ? { scope } : {}) }], cursor: page.cursor },
        );
      }
      const events = page.events.map((e) => ({
        kind: e.kind,
        key: e.key,
        uri: resources.uriOf(e.kind, e.key)!,
        receivedAt: e.receivedAt.toISOString(),
        cursor: e.cursor!,
      }));
      const structured = { events, cursor: page.cursor, timedOut: page.timedOut };
      return { content: [{ type: 'text', text: JSON.stringify(structured) }], structuredContent: structured };
    },
  };
}
