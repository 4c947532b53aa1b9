// POST /mcp and /mcp/<toolset>: the Model Context Protocol's Streamable HTTP transport (docs/decisions/060), stateless
// (each request gets its own server, so any replica serves any call), for clients of 2026-07-28 and of the 2025
// revisions (the SDK's createMcpHandler serves both). Before the SDK sees a request: the Host and Origin checks (DNS
// rebinding), the app's authentication (the gateway's keys, apps file and JWTs, as on every route), and for a JWT app
// a call of a tool outside its scopes is a 403 insufficient_scope naming the scope (step-up, RFC 6750).
//
// Change notifications (2026-07-28 subscriptions/listen): the SDK's listen router writes the stream (the
// acknowledgement, the notifications, keep-alives, teardown); its event bus is this module's ListenBus, which gives
// each stream only the changes of the resources it asked for that its app may read (after a reload, with the scopes
// the reload left it), from the gateway's event bus (src/server/mcp/resources.ts watch), so any replica's event
// reaches it.
import { AsyncLocalStorage } from 'node:async_hooks';
import { setMaxListeners } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type {
  AuthInfo,
  JSONRPCRequest,
  RequestStateCodec,
  ServerEvent,
  ServerEventBus,
} from '@modelcontextprotocol/server';
import { GraphQLError } from 'graphql';

import type { Caller } from '../../auth/caller.js';
import { expiredNow, onExpiry, type AuthExpiry } from '../../auth/jwt.js';
import { authorizationOf, type Authenticate } from '../../auth/keys.js';
import { ErrorCode } from '../../errors.js';
import { logUnexpected, type Logger } from '../../logger.js';
import type { LiveSubscriptions } from '../../ratelimit/live-subscriptions.js';
import { Delivery, type HeldCredentials, type Holding } from '../held-credentials.js';
import type { Route } from '../http.js';
import { contentType, readBodyText } from '../respond.js';
import { refusedParams } from './params.js';
import { loadMcpSdk, type McpSdk } from './sdk.js';
import { createRequestServer, type McpSurface, type Readmitted } from './server.js';

export interface McpHttpOptions {
  readonly surface: McpSurface;
  readonly authenticate: Authenticate;
  /** Host names the Host and Origin headers may name (ports aside), besides the SDK's names of localhost. */
  readonly allowedHosts: readonly string[];
  /** The public base URL (PUBLIC_URL, or the listening address), for the resource metadata. */
  readonly publicUrl: () => string;
  /** AUTH_*: apps sign in with JWTs; the protected-resource metadata and the OAuth challenges are then served. */
  readonly oauth: {
    readonly issuers: readonly string[];
    readonly scopePrefix: string;
    readonly scopes: readonly string[];
  } | null;
  readonly maxBodyBytes: number;
  /** The sealed requestState of approval elicitations (src/server/mcp/approval.ts). */
  readonly codec: RequestStateCodec<unknown>;
  readonly logger: Logger;
  /** When a stream opened with a JWT ends: the same rule and clock as graphql-ws and SSE (src/auth/jwt.ts onExpiry). */
  readonly expiry?: AuthExpiry;
  /** What credentials hold open, authenticated again after a reload: each request, for as long as it is open. */
  readonly held: HeldCredentials;
  /** Each app's live subscriptions (APP_LIVE_SUBSCRIPTIONS): a listen stream counts as one while it is open. */
  readonly live?: LiveSubscriptions;
}

/** The most resource URIs one subscriptions/listen may name. */
export const MAX_LISTENED_RESOURCES = 100;
/** The protocol revisions whose subscriptions/listen the endpoint serves (the SDK's modern revisions). */
export const LISTEN_REVISIONS: readonly string[] = ['2026-07-28'];
/** The most subscriptions/listen streams one app holds open on one replica (the SDK's own bound is for all apps). */
export const MAX_LISTENS_PER_APP = 16;

/** What the listen stream being opened is for: set around the SDK's handling of a subscriptions/listen request. */
interface OpeningListen {
  readonly caller: Caller;
  /** Held while a reload checks the request's credential: the changes wait (src/server/held-credentials.ts). */
  readonly delivery: Delivery;
  readonly uris: readonly string[];
  /** The request's caller as each reload leaves it (Readmitted). */
  readonly readmitted: Readmitted;
  readonly requestId: string;
  /**
   * Whether the caller's token has expired on the gateway's clock, in which case the stream is ended as its scheduled
   * end at the expiry ends it (that end may run late: a timer firing late, a clock moved).
   */
  readonly endedByExpiry: () => boolean;
}

/**
 * The SDK's change-event bus, per stream: the SDK's router subscribes synchronously while serving the listen request,
 * inside the request's async context, which says whose stream it is and which URIs it named. Nothing is published
 * through it: the gateway's own bus is the source, keyed by resource, so an event costs nothing for other streams.
 */
class ListenBus implements ServerEventBus {
  readonly opening = new AsyncLocalStorage<OpeningListen>();
  constructor(
    private readonly surface: McpSurface,
    private readonly logger: Logger,
  ) {}

  publish(_event: ServerEvent): void {}

  subscribe(listener: (event: ServerEvent) => void): () => void {
    const open = this.opening.getStore();
    const resources = this.surface.resources;
    if (!open || !resources) return () => undefined;
    // While a reload checks the credential, the changes wait, in order, and go out once it is admitted again, those
    // of resources it may still read; refused, the stream ends and they are never sent.
    let caller = open.caller;
    let waiting: string[] | null = null;
    const resume = () => {
      const uris = waiting ?? [];
      waiting = null;
      for (const uri of uris) if (resources.watchable(caller, uri)) changed(uri);
    };
    // No change is told after the token's expiry: whichever notices it first, this or the scheduled end, ends the
    // stream.
    const changed = (uri: string) => {
      if (open.delivery.held) {
        if (waiting === null) open.delivery.whenResumed(resume);
        return void (waiting ??= []).push(uri);
      }
      if (!open.endedByExpiry()) listener({ kind: 'resource_updated', uri });
    };
    let stop: () => void;
    try {
      stop = resources.watch(open.caller, open.uris, changed);
    } catch (err) {
      // The SDK answers the listen request "Internal server error" and logs nothing of it: logged here in full.
      logUnexpected(this.logger, err, { requestId: open.requestId }, 'unexpected error in an MCP subscriptions/listen');
      throw err;
    }
    // After a reload the stream is watched as one opened now would be: a resource whose scope its app lost is no
    // longer signalled, as one outside its scopes never is (no oracle); its other resources go on.
    const off = open.readmitted((now) => {
      caller = now;
      stop();
      stop = resources.watch(caller, open.uris, changed);
    });
    return () => {
      off();
      stop();
    };
  }
}

/** The resource URIs of a subscriptions/listen request, or null when the body is none. */
function listenedUris(body: unknown): string[] | null {
  if (!body || typeof body !== 'object' || Array.isArray(body)) return null;
  const { method, params } = body as {
    method?: unknown;
    params?: { notifications?: { resourceSubscriptions?: unknown } };
  };
  if (method !== 'subscriptions/listen') return null;
  const uris = params?.notifications?.resourceSubscriptions;
  return Array.isArray(uris) ? uris.filter((u): u is string => typeof u === 'string') : [];
}

const MCP_PATH = /^\/mcp(?:\/([a-z0-9][a-z0-9_-]{0,63}))?$/;
const METADATA_PATH = /^\/\.well-known\/oauth-protected-resource\/mcp(?:\/([a-z0-9][a-z0-9_-]{0,63}))?$/;

/** A JSON-RPC error answer with an HTTP status (the transport's refusals carry no request id). */
function sendJsonRpcError(
  res: ServerResponse,
  status: number,
  code: number,
  message: string,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

/**
 * A value of a WWW-Authenticate parameter (RFC 9110 quoted-string), of the characters RFC 6750 §3 allows in it: a
 * token's own text (an iss or crit outside Latin-1, a control character) is shown as `?`, so the header can be sent.
 */
function quoted(text: string): string {
  return `"${text.replace(/[^\x20-\x7e]/g, '?').replace(/["\\]/g, '\\$&')}"`;
}

/**
 * The MCP routes, and `close` for shutdown: it ends every subscriptions/listen stream (the SDK ends the stream it
 * writes when its request is aborted), as graphql-ws and SSE subscriptions are ended, and answers every waiting
 * wait_for_events with its cursor, so that none holds the drain.
 */
export function mcpRoutes(o: McpHttpOptions): { routes: Route[]; close(): void } {
  const resourceOf = (toolset: string) => `${o.publicUrl()}/mcp${toolset ? `/${toolset}` : ''}`;
  const metadataUrlOf = (toolset: string) =>
    `${o.publicUrl()}/.well-known/oauth-protected-resource/mcp${toolset ? `/${toolset}` : ''}`;

  const bus = new ListenBus(o.surface, o.logger);
  const listening = new Map<string, number>();
  // The open listen streams, ended at shutdown (one opened after it is ended at once); `stopping` ends the waits.
  const streams = new Set<AbortController>();
  const stopping = new AbortController();
  // Each waiting wait_for_events listens on it, and takes its listener off when it ends: as many as wait, no bound to
  // warn past (Node warns from the eleventh listener of an EventTarget).
  setMaxListeners(0, stopping.signal);
  // Made with the SDK on the first request (src/server/mcp/sdk.ts): one handler for the whole gateway, whose factory
  // makes each request's server from what the route authenticated.
  let endpoint: { sdk: McpSdk; allowed: string[]; handler: ReturnType<McpSdk['createMcpHandler']> } | null = null;
  const load = async () => {
    const sdk = await loadMcpSdk();
    return (endpoint ??= {
      sdk,
      allowed: [...new Set([...sdk.localhostAllowedHostnames(), ...o.allowedHosts])],
      handler: sdk.createMcpHandler(
        (ctx) => {
          const extra = ctx.authInfo?.extra as {
            caller: Caller;
            toolset: string;
            requestId: string;
            revoked: AbortSignal;
            readmitted: Readmitted;
            delivery: Delivery;
          };
          return createRequestServer(o.surface, extra.toolset, extra.caller, extra.requestId, {
            revoked: extra.revoked,
            stopping: stopping.signal,
            readmitted: extra.readmitted,
            delivery: extra.delivery,
            requestState: (state, ctx) => o.codec.verify(state, ctx),
            era: ctx.era,
            logger: o.logger,
          });
        },
        {
          legacy: 'stateless',
          bus,
          maxRequestBodySize: o.maxBodyBytes,
          onerror: (err) => o.logger.debug({ err: err.message }, 'MCP request refused by the protocol layer'),
        },
      ),
    });
  };

  const challenge = (toolset: string, error?: { code: string; description: string; scope?: string }): string => {
    const parts: string[] = [];
    if (error) parts.push(`error=${quoted(error.code)}`, `error_description=${quoted(error.description)}`);
    if (error?.scope) parts.push(`scope=${quoted(error.scope)}`);
    if (o.oauth) parts.push(`resource_metadata=${quoted(metadataUrlOf(toolset))}`);
    return parts.length ? `Bearer ${parts.join(', ')}` : 'Bearer';
  };

  const routes: Route[] = [
    {
      method: 'ANY',
      path: MCP_PATH,
      name: 'mcp',
      async handle(req, res, ctx) {
        const toolset = ctx.params[0] ?? '';
        const { sdk, allowed, handler } = endpoint ?? (await load());
        // DNS rebinding: a page on another site whose name resolves to this gateway must not reach it.
        const host = sdk.validateHostHeader(req.headers.host, allowed);
        if (!host.ok) return sendJsonRpcError(res, 403, -32000, `Forbidden: ${host.message}`);
        const origin = sdk.validateOriginHeader(req.headers.origin, allowed);
        if (!origin.ok) return sendJsonRpcError(res, 403, -32000, `Forbidden: ${origin.message}`);

        // The configuration the credential is checked under (a JWT's verification awaits its keys).
        const checkedUnder = o.held.generation();
        const auth = await o.authenticate(authorizationOf(req), ctx);
        if (!auth.ok) {
          if (auth.reason === 'unavailable')
            return sendJsonRpcError(res, 503, -32000, auth.message, { 'retry-after': '5' });
          const header =
            auth.reason === 'missing'
              ? challenge(toolset)
              : challenge(toolset, { code: 'invalid_token', description: auth.message });
          return sendJsonRpcError(res, 401, -32001, auth.message, { 'www-authenticate': header });
        }
        const caller = auth.caller;
        ctx.app = caller.app;
        // Asked only of an authenticated caller: one without valid credentials is answered the same 401 whether the
        // toolset exists or not, so that it cannot learn which do.
        if (!o.surface.toolsets.has(toolset))
          return sendJsonRpcError(res, 404, -32000, `no MCP toolset ${toolset} on this gateway`);

        let raw: Buffer | null = null;
        let parsed: unknown;
        if (req.method === 'POST') {
          // A JSON body is read in the charset its Content-Type declares, as every JSON body is; the SDK is handed
          // the message parsed here, so it never reads the bytes as UTF-8 itself (a bare type: no lookup).
          const header = contentType(req);
          const read = await readBodyText(
            req,
            o.maxBodyBytes,
            header.type === 'application/json' ? header.charset : null,
          );
          if (!read.ok) {
            if (read.close) res.setHeader('connection', 'close');
            if (read.status === 400) return sendJsonRpcError(res, 400, -32700, `Parse error: ${read.message!}`);
            return sendJsonRpcError(
              res,
              read.status,
              -32000,
              read.message ?? `the body exceeds ${o.maxBodyBytes} bytes`,
            );
          }
          raw = read.raw;
          try {
            // Read as the SDK reads a body (its TextDecoder drops a byte order mark), so that what the gateway
            // classifies here (a listen stream, a step-up) is the message the SDK then serves.
            parsed = read.raw.length ? JSON.parse(read.text) : undefined;
          } catch {
            parsed = undefined;
          }
          // Step-up (RFC 6750 §3.1, MCP authorization): a JWT app calling a tool outside its scopes is told which
          // scope to ask its identity provider for; an app with a key gets the same refusal as a tool error.
          const refusal = o.oauth && caller.via === 'JWT' ? stepUp(o.surface, toolset, caller, parsed) : null;
          if (refusal) {
            const scope = `${o.oauth!.scopePrefix}${refusal.scope}`;
            return sendJsonRpcError(res, 403, -32001, refusal.message, {
              'www-authenticate': challenge(toolset, {
                code: 'insufficient_scope',
                description: `the scope ${scope} is required`,
                scope,
              }),
            });
          }
        }

        const url = `http://${req.headers.host ?? 'localhost'}${ctx.path}${ctx.search}`;
        const headers = new Headers();
        for (const [name, value] of Object.entries(req.headers)) {
          // The app's credentials stay here: the SDK gets the authenticated caller, never the token.
          if (value === undefined || name === 'authorization' || name === 'cookie') continue;
          headers.set(name, Array.isArray(value) ? value.join(', ') : value);
        }
        const listened = listenedUris(parsed);
        // After a reload, as graphql-ws and SSE do: a request held open whose credential the reload refuses ends (a
        // waiting call reads `revoked`, src/server/mcp/wait.ts); one admitted again is told its caller as reloaded
        // (`readmitted`: a listen stream's resources are watched again, a waiting call ends when it lost a kind).
        const abort = new AbortController();
        const revoked = new AbortController();
        const listeners = new Set<(caller: Caller) => void>();
        let admitted: Caller | null = null;
        const readmitted: Readmitted = (listener) => {
          listeners.add(listener);
          if (admitted) listener(admitted);
          return () => void listeners.delete(listener);
        };
        const delivery = new Delivery();
        const listen: OpeningListen | null = listened && {
          caller,
          delivery,
          uris: listened,
          readmitted,
          requestId: ctx.requestId,
          endedByExpiry: () => {
            if (expiredNow(o.expiry, caller) === null) return false;
            abort.abort();
            return true;
          },
        };
        const holding: Holding = {
          delivery,
          authorization: req.headers.authorization,
          caller,
          refused: (failure) => revoked.abort(failure),
          admitted: (caller) => {
            admitted = caller;
            for (const listener of [...listeners]) listener(caller);
          },
        };
        o.held.hold(holding, checkedUnder);
        const closed = () => {
          o.held.release(holding);
          abort.abort();
        };
        res.on('close', closed);
        // A client gone while its credential was checked closed before the listener above: nothing is held for it.
        if (req.socket.destroyed) closed();
        const request = new Request(url, {
          method: req.method ?? 'GET',
          headers,
          signal: abort.signal,
          ...(raw ? { body: new Uint8Array(raw) } : {}),
        });
        const authInfo: AuthInfo = {
          token: '',
          clientId: caller.app ?? caller.scope,
          scopes: [...caller.grants.scopes],
          ...(caller.expiresAt ? { expiresAt: Math.floor(caller.expiresAt / 1000) } : {}),
          extra: { caller, toolset, requestId: ctx.requestId, revoked: revoked.signal, readmitted, delivery },
        };
        const options = { authInfo, ...(parsed !== undefined ? { parsedBody: parsed } : {}) };
        // Only a listen of the 2026-07-28 era is one: the SDK answers any other with -32601, and it is not counted or
        // charged (the SDK's entry classifies the era, as here).
        const route = listened
          ? sdk.classifyInboundRequest({
              httpMethod: 'POST',
              body: parsed,
              protocolVersionHeader: headers.get('mcp-protocol-version') ?? undefined,
              mcpMethodHeader: headers.get('mcp-method') ?? undefined,
              mcpNameHeader: headers.get('mcp-name') ?? undefined,
            })
          : null;
        const revision = route?.kind === 'modern' ? route.classification.revision : undefined;
        // The SDK refuses, before its listen router opens anything, a listen without the MCP-Protocol-Version or the
        // Mcp-Method header (SEP-2243): such a listen is refused, so it is neither counted nor charged.
        const headed = headers.has('mcp-protocol-version') && headers.has('mcp-method');
        if (listened && revision !== undefined && headed) {
          // Its client already gone: nothing to count or open.
          if (abort.signal.aborted) return;
          const id = (parsed as { id?: unknown }).id;
          const refuse = (code: number, message: string, data?: Record<string, unknown>, status = 200) => {
            res.writeHead(status, { 'content-type': 'application/json' });
            res.end(
              JSON.stringify({
                jsonrpc: '2.0',
                id: typeof id === 'string' || typeof id === 'number' ? id : null,
                error: { code, message, ...(data ? { data } : {}) },
              }),
            );
          };
          // A revision the endpoint does not serve is refused as the SDK refuses it (400, -32022), and here, before
          // it is counted or charged: should the SDK serve a later revision than LISTEN_REVISIONS, such a listen is
          // refused rather than opened uncounted.
          if (!LISTEN_REVISIONS.includes(revision)) {
            const data = { supported: [...LISTEN_REVISIONS], requested: revision };
            const unsupported = new sdk.UnsupportedProtocolVersionError(data);
            return refuse(unsupported.code, unsupported.message, data, 400);
          }
          // Params the SDK's schema refuses are refused first, before the listen is counted or charged: by the check
          // the SDK's listen router makes later (the codec of the request's era), in the words of every other
          // request's (src/server/mcp/params.ts).
          const invalid = refusedParams(revision, 'subscriptions/listen', parsed as JSONRPCRequest);
          if (invalid) return refuse(-32602, invalid.message, { field: invalid.field });
          if (listened.length > MAX_LISTENED_RESOURCES)
            return refuse(
              -32602,
              `Invalid params: a subscriptions/listen names at most ${MAX_LISTENED_RESOURCES} resources (this one names ${listened.length}); open several`,
            );
          const open = listening.get(caller.scope) ?? 0;
          if (open >= MAX_LISTENS_PER_APP)
            return refuse(
              -32603,
              `Subscription limit reached: this app already has ${MAX_LISTENS_PER_APP} subscriptions/listen streams open on this replica; close one, or name several resources in one`,
              { code: ErrorCode.RATE_LIMITED, bound: 'mcp-listens:count', limit: MAX_LISTENS_PER_APP },
            );
          // One of the app's live subscriptions, over every transport (APP_LIVE_SUBSCRIPTIONS): refused as the reads
          // budget refuses a listen, RATE_LIMITED with its bound and limit in `data`.
          const taken = o.live?.take(caller);
          if (taken instanceof GraphQLError) return refuse(-32603, taken.message, { ...taken.extensions });
          // Counted before the reads budget is asked (which may wait on the database), so that listens sent at once
          // cannot all pass the bound; given back when the stream ends, or at once when the budget refuses it.
          listening.set(caller.scope, open + 1);
          let counted = true;
          const uncount = () => {
            if (!counted) return;
            counted = false;
            taken?.();
            const left = (listening.get(caller.scope) ?? 1) - 1;
            if (left > 0) listening.set(caller.scope, left);
            else listening.delete(caller.scope);
          };
          res.on('close', uncount);
          // A listen is a subscription: it spends a point of its app's reads budget, as one over graphql-ws or SSE
          // does and as wait_for_events does (the one rule, src/server/mcp/resources.ts EventSource.admit).
          try {
            await o.surface.resources?.events.admit(caller);
          } catch (err) {
            if (!(err instanceof GraphQLError) || err.extensions.code !== ErrorCode.RATE_LIMITED) throw err;
            uncount();
            const { retryAfter, ...limit } = err.extensions;
            return refuse(-32603, err.message, { ...limit, retryAfterSeconds: retryAfter });
          }
          if (abort.signal.aborted) return;
          streams.add(abort);
          res.on('close', () => streams.delete(abort));
          if (stopping.signal.aborted) abort.abort();
          // A stream opened with a JWT ends when the token does, or when a reload refuses its credential, as WebSocket
          // and SSE connections do.
          const cancelExpiry = onExpiry(o.expiry, caller, () => abort.abort());
          revoked.signal.addEventListener('abort', () => abort.abort(), { once: true });
          res.on('close', cancelExpiry);
        }
        const response = listen
          ? await bus.opening.run(listen, () => handler.fetch(request, options))
          : await handler.fetch(request, options);
        res.statusCode = response.status;
        response.headers.forEach((value, name) => res.setHeader(name, value));
        if (!response.body) {
          res.end();
          return;
        }
        res.flushHeaders();
        Readable.fromWeb(response.body as import('node:stream/web').ReadableStream).pipe(res);
      },
    },
  ];

  if (o.oauth) {
    const oauth = o.oauth;
    routes.push({
      method: 'GET',
      path: METADATA_PATH,
      name: 'mcp-resource-metadata',
      handle(req, res, ctx) {
        // Served for any toolset name, as its endpoint's 401 points here whether it exists or not: the metadata is
        // public (read before a token), and the same for every toolset but `resource`, so it tells no one which exist.
        const toolset = ctx.params[0] ?? '';
        // RFC 9728 §3.2: the protected resource's metadata; the authorization servers are the JWTs' issuers
        // (AUTH_ISSUER, or each of AUTH_ISSUERS).
        res.writeHead(200, {
          'content-type': 'application/json',
          'cache-control': 'max-age=3600',
          'access-control-allow-origin': '*',
        });
        res.end(
          JSON.stringify({
            resource: resourceOf(toolset),
            authorization_servers: [...oauth.issuers],
            scopes_supported: oauth.scopes.map((s) => `${oauth.scopePrefix}${s}`),
            bearer_methods_supported: ['header'],
            resource_name: 'GraphQL gateway (MCP)',
          }),
        );
      },
    });
  }
  return {
    routes,
    close() {
      stopping.abort();
      for (const stream of streams) stream.abort();
    },
  };
}

/** The refusal of a tools/call of a tool in `toolset` that `caller` may not call, with the scope it lacks. */
function stepUp(
  surface: McpSurface,
  toolset: string,
  caller: Caller,
  body: unknown,
): { message: string; scope: string } | null {
  const calls = Array.isArray(body) ? body : [body];
  for (const message of calls) {
    if (!message || typeof message !== 'object') continue;
    const { method, params } = message as { method?: unknown; params?: { name?: unknown } };
    if (method !== 'tools/call' || typeof params?.name !== 'string') continue;
    const tool = surface.toolsets.get(toolset)?.find((t) => t.name === params.name);
    const refusal = tool?.refusal(caller);
    if (refusal?.scope) return { message: refusal.message, scope: refusal.scope };
  }
  return null;
}
