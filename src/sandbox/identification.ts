// Embedded simulator of the identification interface (docs/upstreams.md, Identity verification and identification), speaking real
// HTTP on loopback. Written from the spec alone: it imports nothing from the gateway. The gateway starts
// two of them, PRODUCTION and PRODLIKE, on two addresses with the same paths (spec: Addresses).
//
// What the spec leaves open and the sandbox decides:
// - a workflow is known unless its id starts with `unknown` (then 404 WORKFLOW_NOT_FOUND);
// - a request field the spec's table does not name (but the superseded `workflowPreferences`) is a 400 naming it;
// - an `Idempotency-Key` header, when sent, replays the first 202 for the same body (409 for another body);
// - the link is served by the sandbox itself: GET /i/<idShort> is a small HTML page (410 once expired);
// - errors are `{ code, message }`;
// - completion (spec: Events 2, "through a callback"; payload not shown): the callback address is configured per
//   workflow, as on the platform (`configureCallback`); `complete(id)`, or the "Finish the scenario" button of
//   the link page, POSTs `{ id, idShort, workflowId, applicantExternalId?, status, event, completedAt }` there,
//   retrying 5xx and network errors.
import { randomBytes, randomUUID } from 'node:crypto';

import { deliverCallback } from './callbacks.js';
import { FaultInjector } from './faults.js';
import { headerValue, isJsonMediaType, startLoopbackServer } from './http.js';
import {
  ApiError,
  createJsonApiHandler,
  isAbsoluteHttpUrl,
  isPlainObject,
  requireBearer,
  withIdempotency,
  type ApiAnswer,
  type ParsedRequest,
  type RecordedRequest,
} from './json-api.js';

export type { RecordedRequest } from './json-api.js';

export const IDENTIFICATIONS_PATH = '/api/v2/identifications/workflow-instances';
/** Accepted as the identification ACCESS_TOKEN unless `acceptedTokens` says otherwise. */
export const SANDBOX_IDENTIFICATION_TOKEN = 'sandbox-identification-token';
/** Spec, Limits. */
const MAX_LIFETIME_MINUTES = 195;
/**
 * Spec, "Identification request body": its four fields, and `workflowPreferences`, the older detailed configuration the
 * spec names as superseded by workflow settings (an older integration may still send it).
 */
const REQUEST_FIELDS: ReadonlySet<string> = new Set([
  'workflowId',
  'applicantExternalId',
  'linkLifetimeInMinutes',
  'redirectUrl',
  'workflowPreferences',
]);
/** The link's lifetime when the request gives none (the spec does not say; the sandbox's choice). */
const DEFAULT_LIFETIME_MINUTES = 60;

export interface IdentificationSandboxOptions {
  /** Name of the environment, shown in links and records. Default `production`. */
  environment?: 'production' | 'prodlike';
  faultRate?: number;
  latencyMs?: number;
  faultSeed?: number;
  /** Default `[SANDBOX_IDENTIFICATION_TOKEN]`. */
  acceptedTokens?: string[];
  bodyLimitBytes?: number;
  /** Delivery attempts of one completion callback (5xx and network errors are retried). Default 3. */
  callbackAttempts?: number;
}

export interface DeliveredIdentificationCallback {
  readonly id: string;
  readonly url: string;
  readonly body: Record<string, unknown>;
  readonly attempt: number;
  /** Status the receiver answered; null on a network error. */
  readonly status: number | null;
  readonly error?: string;
  readonly at: Date;
}

export interface SandboxIdentification {
  readonly id: string;
  readonly idShort: string;
  readonly url: string;
  readonly workflowId: string;
  readonly applicantExternalId?: string;
  readonly linkLifetimeInMinutes: number;
  readonly redirectUrl?: string;
  readonly environment: string;
  readonly createdAt: string;
  readonly expiresAt: string;
}

export interface IdentificationSandbox {
  /** Base URL, `http://127.0.0.1:<port>`. */
  readonly url: string;
  readonly environment: 'production' | 'prodlike';
  /** Every request received, in order. */
  readonly requests: readonly RecordedRequest[];
  readonly faults: FaultInjector;
  clearRequests(): void;
  /** Identification requests created, oldest first. */
  identifications(): SandboxIdentification[];
  /** Sets (or, with null, removes) the completion callback address of a workflow, as an operator does on the platform. */
  configureCallback(workflowId: string, url: string | null): void;
  /** The callback address configured for a workflow, if any. */
  callbackFor(workflowId: string): string | undefined;
  /** Every completion callback delivery attempt, in order. */
  readonly callbacks: readonly DeliveredIdentificationCallback[];
  /**
   * Ends the scenario of an identification and calls its workflow's address back; the receiver's last status,
   * or null when no address is configured or it could not be reached. `fields` are merged into the body.
   */
  complete(id: string, fields?: Record<string, unknown>): Promise<number | null>;
  close(): Promise<void>;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

export async function startIdentificationSandbox(
  options: IdentificationSandboxOptions = {},
): Promise<IdentificationSandbox> {
  const environment = options.environment ?? 'production';
  const accepted = options.acceptedTokens ?? [SANDBOX_IDENTIFICATION_TOKEN];
  // Every workflow is known except ids starting with `unknown`.
  const isKnownWorkflow = (id: string) => !id.startsWith('unknown');
  const faults = new FaultInjector({
    rate: options.faultRate ?? 0,
    latencyMs: options.latencyMs ?? 0,
    ...(options.faultSeed !== undefined ? { seed: options.faultSeed } : {}),
    errorBody: (status) => ({
      code: status >= 500 ? 'INTERNAL_ERROR' : `HTTP_${status}`,
      message: `injected fault: HTTP ${status}`,
    }),
  });
  const requests: RecordedRequest[] = [];
  const created = new Map<string, SandboxIdentification>();
  const byShort = new Map<string, SandboxIdentification>();
  const replays = new Map<string, { fingerprint: string; answer: ApiAnswer }>();
  const callbackUrls = new Map<string, string>();
  const callbacks: DeliveredIdentificationCallback[] = [];
  const attempts = Math.max(1, options.callbackAttempts ?? 3);
  let closed = false;
  let baseUrl = '';

  async function deliver(rec: SandboxIdentification, fields: Record<string, unknown>): Promise<number | null> {
    const url = callbackUrls.get(rec.workflowId);
    if (!url) return null;
    const body: Record<string, unknown> = {
      id: rec.id,
      idShort: rec.idShort,
      workflowId: rec.workflowId,
      ...(rec.applicantExternalId !== undefined ? { applicantExternalId: rec.applicantExternalId } : {}),
      status: 'COMPLETED',
      event: 'IDENTIFICATION_COMPLETED',
      completedAt: new Date().toISOString(),
      ...fields,
    };
    return deliverCallback(url, body, {
      attempts,
      backoffMs: 100,
      closed: () => closed,
      record: (attempt, status, error) =>
        callbacks.push({
          id: rec.id,
          url,
          body,
          attempt,
          status,
          ...(error === undefined ? {} : { error }),
          at: new Date(),
        }),
    });
  }

  function create(body: unknown): ApiAnswer {
    if (!isPlainObject(body)) throw new ApiError(400, 'BAD_REQUEST', 'body must be a JSON object');
    // Spec, Errors: 400 for a body that is invalid. A name the request table does not list is a misspelt field, which a
    // platform that dropped it would leave the client believing was applied: refused, naming it.
    const unknown = Object.keys(body).filter((name) => !REQUEST_FIELDS.has(name));
    if (unknown.length > 0)
      throw new ApiError(400, 'BAD_REQUEST', `unknown field ${unknown.map((n) => JSON.stringify(n)).join(', ')}`);
    const { workflowId, applicantExternalId, linkLifetimeInMinutes, redirectUrl } = body;
    if (workflowId === undefined || workflowId === null)
      throw new ApiError(400, 'BAD_REQUEST', 'workflowId is required');
    if (typeof workflowId !== 'string' || workflowId.trim() === '')
      throw new ApiError(400, 'BAD_REQUEST', 'workflowId must be a non-empty string');
    if (applicantExternalId !== undefined && typeof applicantExternalId !== 'string') {
      throw new ApiError(400, 'BAD_REQUEST', 'applicantExternalId must be a string');
    }
    if (
      linkLifetimeInMinutes !== undefined &&
      (typeof linkLifetimeInMinutes !== 'number' ||
        !Number.isInteger(linkLifetimeInMinutes) ||
        linkLifetimeInMinutes < 1 ||
        linkLifetimeInMinutes > MAX_LIFETIME_MINUTES)
    ) {
      throw new ApiError(
        400,
        'BAD_REQUEST',
        `linkLifetimeInMinutes must be an integer from 1 to ${MAX_LIFETIME_MINUTES}`,
      );
    }
    if (redirectUrl !== undefined && !isAbsoluteHttpUrl(redirectUrl))
      throw new ApiError(400, 'BAD_REQUEST', 'redirectUrl must be an absolute URL');
    if (!isKnownWorkflow(workflowId)) throw new ApiError(404, 'WORKFLOW_NOT_FOUND', `workflow ${workflowId} not found`);

    const id = randomUUID();
    const idShort = randomBytes(6).toString('base64url');
    const lifetime = (linkLifetimeInMinutes as number | undefined) ?? DEFAULT_LIFETIME_MINUTES;
    const now = Date.now();
    const record: SandboxIdentification = {
      id,
      idShort,
      url: `${baseUrl}/i/${idShort}`,
      workflowId,
      ...(typeof applicantExternalId === 'string' ? { applicantExternalId } : {}),
      linkLifetimeInMinutes: lifetime,
      ...(typeof redirectUrl === 'string' ? { redirectUrl } : {}),
      environment,
      createdAt: new Date(now).toISOString(),
      expiresAt: new Date(now + lifetime * 60_000).toISOString(),
    };
    created.set(id, record);
    byShort.set(idShort, record);
    // Spec, Endpoints: "success status 202 Accepted"; Resources: the answer is { id, idShort, url }.
    return { status: 202, body: { id, idShort, url: record.url } };
  }

  function linkPage(idShort: string): ApiAnswer {
    const rec = byShort.get(idShort);
    if (!rec)
      return { status: 404, html: '<!doctype html><title>Not found</title><p>Unknown identification link.</p>' };
    if (Date.parse(rec.expiresAt) <= Date.now())
      return { status: 410, html: '<!doctype html><title>Expired</title><p>This identification link has expired.</p>' };
    const next = `<form method="post" action="/i/${escapeHtml(rec.idShort)}/finish"><button type="submit">Finish the scenario</button></form>`;
    return {
      status: 200,
      html: `<!doctype html><meta charset="utf-8"><title>Sandbox identification</title><h1>Sandbox identification (${escapeHtml(environment)})</h1><p>Workflow ${escapeHtml(rec.workflowId)}, request ${escapeHtml(rec.id)}.</p>${next}`,
    };
  }

  async function finish(idShort: string): Promise<ApiAnswer> {
    const rec = byShort.get(idShort);
    if (!rec)
      return { status: 404, html: '<!doctype html><title>Not found</title><p>Unknown identification link.</p>' };
    if (Date.parse(rec.expiresAt) <= Date.now())
      return { status: 410, html: '<!doctype html><title>Expired</title><p>This identification link has expired.</p>' };
    await deliver(rec, {});
    // Spec, Events 2: "the user is also sent to redirectUrl when it was supplied".
    if (rec.redirectUrl) return { status: 303, html: '', headers: { location: rec.redirectUrl } };
    return {
      status: 200,
      html: '<!doctype html><meta charset="utf-8"><title>Done</title><p>Scenario finished. You may close this page.</p>',
    };
  }

  function route({ req, method, path, body, malformed }: ParsedRequest): ApiAnswer | Promise<ApiAnswer> {
    const finishing = /^\/i\/([^/]+)\/finish$/.exec(path);
    if (method === 'POST' && finishing) return finish(finishing[1]!);
    if (method === 'GET' && path.startsWith('/i/')) return linkPage(path.slice(3));
    if (path !== IDENTIFICATIONS_PATH) throw new ApiError(404, 'NOT_FOUND', `no route for ${path}`);
    if (method !== 'POST') throw new ApiError(405, 'METHOD_NOT_ALLOWED', 'only POST is supported');
    requireBearer(req, accepted);
    if (!isJsonMediaType(headerValue(req, 'content-type')))
      throw new ApiError(400, 'BAD_REQUEST', 'Content-Type must be application/json');
    if (malformed) throw new ApiError(400, 'BAD_REQUEST', 'body is not valid JSON');
    return withIdempotency(replays, headerValue(req, 'idempotency-key'), body, create);
  }

  const server = await startLoopbackServer(
    createJsonApiHandler({
      faults,
      route,
      requests,
      ...(options.bodyLimitBytes ? { bodyLimitBytes: options.bodyLimitBytes } : {}),
    }),
  );
  baseUrl = server.url;

  return {
    url: server.url,
    environment,
    requests,
    faults,
    clearRequests() {
      requests.length = 0;
    },
    identifications: () => [...created.values()],
    configureCallback(workflowId, url) {
      if (url === null) callbackUrls.delete(workflowId);
      else callbackUrls.set(workflowId, url);
    },
    callbackFor: (workflowId) => callbackUrls.get(workflowId),
    callbacks,
    async complete(id, fields = {}) {
      const rec = created.get(id);
      if (!rec) throw new Error(`unknown identification ${id}`);
      return deliver(rec, fields);
    },
    close() {
      closed = true;
      return server.close();
    },
  };
}
