// Embedded simulator of the verification interface and the rfm check (docs/upstreams.md, Identity verification and identification),
// speaking real HTTP on loopback. Written from the spec alone: it imports nothing from the gateway.
//
// The spec shows no field names beyond workflowId, callbackUrl and verificationExternalId. The sandbox
// follows the names of docs/decisions/004-verification-wire-names.md, written here on their own:
// - registration `{ workflowId, applicant: {...}, verificationExternalId?, callbackUrl? }`, answered
//   200 `{ verificationExternalId, jobResults: { status: "ACCEPTED", jobs: [...] } }`;
// - results `{ verificationExternalId: [ids] }` (one id as a string works too), answered
//   200 `{ results: [ { verificationExternalId, status, ... } ] }` holding only the ids it knows;
// - callback: POST callbackUrl with the completed result after `callbackDelayMs`, retried on 5xx and
//   network errors;
// - rfm: any JSON object; `{ isInCatalog, matches, checkedAt }`, true when a string value of the body
//   equals (case-insensitively) an entry of `SANDBOX_RFM_CATALOG`.
// A workflow is known unless its id starts with `unknown` (404). Errors are `{ code, message }`.
import { randomUUID } from 'node:crypto';

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

export const VERIFICATIONS_PATH = '/api/v2/verifications/workflow-instances';
export const RESULTS_PATH = '/api/v2/verifications/results';
export const RFM_PATH = '/api/v1/rfm/is-in-catalog';

/** The JWT accepted unless `acceptedTokens` says otherwise (HS256, issuer `verification-sandbox`). */
export const SANDBOX_VERIFICATION_TOKEN =
  'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJ2ZXJpZmljYXRpb24tc2FuZGJveCIsInN1YiI6ImdhdGV3YXkiLCJzY29wZSI6InZlcmlmaWNhdGlvbnMgcmZtIn0.jKlIm2YSi3h_psweSjWkqWAd2_iabxpFRhxsnu6y8qE';

/** Default rfm catalog: names and numbers that the sandbox reports as listed. */
export const SANDBOX_RFM_CATALOG = ['Listed Person', '000000000000'];

export interface VerificationSandboxOptions {
  /** Delay between a registration and its completion (and callback). Default 1500 ms. */
  callbackDelayMs?: number;
  /** Delivery attempts of one callback (5xx and network errors are retried). Default 3. */
  callbackAttempts?: number;
  faultRate?: number;
  latencyMs?: number;
  faultSeed?: number;
  /** Default `[SANDBOX_VERIFICATION_TOKEN]`. */
  acceptedTokens?: string[];
  bodyLimitBytes?: number;
}

export interface SandboxVerification {
  readonly externalId: string;
  readonly workflowId: string;
  readonly callbackUrl?: string;
  readonly registeredAt: string;
  /** The result once complete; null while in progress. */
  readonly result: Record<string, unknown> | null;
}

export interface DeliveredCallback {
  readonly externalId: string;
  readonly url: string;
  readonly body: Record<string, unknown>;
  readonly attempt: number;
  /** Status the receiver answered; null on a network error. */
  readonly status: number | null;
  readonly error?: string;
  readonly at: Date;
}

export interface VerificationSandbox {
  /** Base URL, `http://127.0.0.1:<port>`. */
  readonly url: string;
  /** Every request received, in order (registrations, results and rfm checks). */
  readonly requests: readonly RecordedRequest[];
  readonly faults: FaultInjector;
  clearRequests(): void;
  /** Every callback delivery attempt, in order. */
  readonly callbacks: readonly DeliveredCallback[];
  verifications(): SandboxVerification[];
  /** Completes a verification now (and calls back) instead of after the delay. */
  complete(externalId: string): Promise<void>;
  /** Delivers the completed result of a verification to its callbackUrl once more; the receiver's status. */
  redeliver(externalId: string): Promise<number | null>;
  /**
   * From now on (`on` true) the ids it assigns (a registration without `verificationExternalId`) are UUIDs written in
   * capital letters, as some services write them; it knows each only as it wrote it (its results match ids exactly).
   */
  assignIdsInCapitals(on?: boolean): void;
  close(): Promise<void>;
}

interface State {
  externalId: string;
  workflowId: string;
  applicant: Record<string, unknown>;
  callbackUrl?: string;
  registeredAt: string;
  result: Record<string, unknown> | null;
  timer?: NodeJS.Timeout;
}

function strings(value: unknown, out: string[] = []): string[] {
  if (typeof value === 'string') out.push(value);
  else if (Array.isArray(value)) for (const v of value) strings(v, out);
  else if (isPlainObject(value)) for (const v of Object.values(value)) strings(v, out);
  return out;
}

/** A realistic result: a decision and the checks of the sources the spec names. */
function resultOf(v: State): Record<string, unknown> {
  const declined = strings(v.applicant).some((s) => /decline/i.test(s));
  return {
    verificationExternalId: v.externalId,
    workflowId: v.workflowId,
    status: 'COMPLETED',
    decision: declined ? 'DECLINED' : 'APPROVED',
    score: declined ? 0.12 : 0.97,
    checks: [
      { source: 'passport', status: declined ? 'INVALID' : 'VALID' },
      { source: 'inn', status: 'FOUND' },
      { source: 'rfm', status: 'NOT_IN_CATALOG' },
      { source: 'mnp', status: 'NOT_PORTED' },
    ],
    completedAt: new Date().toISOString(),
  };
}

export async function startVerificationSandbox(options: VerificationSandboxOptions = {}): Promise<VerificationSandbox> {
  const delayMs = options.callbackDelayMs ?? 1500;
  const attempts = Math.max(1, options.callbackAttempts ?? 3);
  const accepted = options.acceptedTokens ?? [SANDBOX_VERIFICATION_TOKEN];
  // Every workflow is known except ids starting with `unknown`.
  const isKnownWorkflow = (id: string) => !id.startsWith('unknown');
  const catalog = SANDBOX_RFM_CATALOG.map((s) => s.toLowerCase());
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
  const callbacks: DeliveredCallback[] = [];
  const verifications = new Map<string, State>();
  const replays = new Map<string, { fingerprint: string; answer: ApiAnswer }>();
  const timers = new Set<NodeJS.Timeout>();
  let closed = false;
  let capitals = false;

  async function deliver(v: State, body: Record<string, unknown>): Promise<number | null> {
    if (!v.callbackUrl) return null;
    const url = v.callbackUrl;
    return deliverCallback(url, body, {
      attempts,
      backoffMs: 250,
      closed: () => closed,
      record: (attempt, status, error) =>
        callbacks.push({
          externalId: v.externalId,
          url,
          body,
          attempt,
          status,
          ...(error === undefined ? {} : { error }),
          at: new Date(),
        }),
    });
  }

  async function complete(v: State): Promise<void> {
    if (v.timer) {
      clearTimeout(v.timer);
      timers.delete(v.timer);
      v.timer = undefined;
    }
    if (v.result) return;
    v.result = resultOf(v);
    await deliver(v, v.result);
  }

  function register(body: unknown): ApiAnswer {
    if (!isPlainObject(body)) throw new ApiError(400, 'BAD_REQUEST', 'body must be a JSON object');
    const { workflowId, applicant, verificationExternalId, callbackUrl } = body;
    if (typeof workflowId !== 'string' || workflowId.trim() === '')
      throw new ApiError(400, 'BAD_REQUEST', 'workflowId is required');
    if (!isPlainObject(applicant)) throw new ApiError(400, 'BAD_REQUEST', 'applicant must be a JSON object');
    if (
      verificationExternalId !== undefined &&
      (typeof verificationExternalId !== 'string' || verificationExternalId === '')
    ) {
      throw new ApiError(400, 'BAD_REQUEST', 'verificationExternalId must be a non-empty string');
    }
    if (callbackUrl !== undefined && !isAbsoluteHttpUrl(callbackUrl))
      throw new ApiError(400, 'BAD_REQUEST', 'callbackUrl must be an absolute http(s) URL');
    if (!isKnownWorkflow(workflowId)) throw new ApiError(404, 'WORKFLOW_NOT_FOUND', `workflow ${workflowId} not found`);
    const externalId =
      (verificationExternalId as string | undefined) ?? (capitals ? randomUUID().toUpperCase() : randomUUID());
    if (verifications.has(externalId))
      throw new ApiError(409, 'VERIFICATION_EXISTS', `verification ${externalId} is already registered`);
    const v: State = {
      externalId,
      workflowId,
      applicant,
      ...(typeof callbackUrl === 'string' ? { callbackUrl } : {}),
      registeredAt: new Date().toISOString(),
      result: null,
    };
    verifications.set(externalId, v);
    const timer = setTimeout(() => {
      timers.delete(timer);
      v.timer = undefined;
      void complete(v);
    }, delayMs);
    timers.add(timer);
    v.timer = timer;
    return {
      status: 200,
      body: {
        verificationExternalId: externalId,
        jobResults: {
          status: 'ACCEPTED',
          jobs: [
            { job: 'passport', status: 'QUEUED' },
            { job: 'inn', status: 'QUEUED' },
            { job: 'rfm', status: 'QUEUED' },
          ],
        },
      },
    };
  }

  function results(body: unknown): ApiAnswer {
    const ids = isPlainObject(body) ? body.verificationExternalId : undefined;
    const list = typeof ids === 'string' ? [ids] : ids;
    if (!Array.isArray(list) || list.length === 0 || !list.every((id) => typeof id === 'string' && id !== '')) {
      throw new ApiError(400, 'BAD_REQUEST', 'verificationExternalId must be a non-empty list of ids');
    }
    const out: Record<string, unknown>[] = [];
    for (const id of new Set(list as string[])) {
      const v = verifications.get(id);
      if (!v) continue;
      out.push(v.result ?? { verificationExternalId: id, workflowId: v.workflowId, status: 'IN_PROGRESS' });
    }
    return { status: 200, body: { results: out } };
  }

  function rfm(body: unknown): ApiAnswer {
    if (!isPlainObject(body)) throw new ApiError(400, 'BAD_REQUEST', 'body must be a JSON object');
    const matches = [...new Set(strings(body).filter((s) => catalog.includes(s.toLowerCase())))];
    return { status: 200, body: { isInCatalog: matches.length > 0, matches, checkedAt: new Date().toISOString() } };
  }

  function route({ req, method, path, body, malformed }: ParsedRequest): ApiAnswer {
    if (path !== VERIFICATIONS_PATH && path !== RESULTS_PATH && path !== RFM_PATH)
      throw new ApiError(404, 'NOT_FOUND', `no route for ${path}`);
    if (method !== 'POST') throw new ApiError(405, 'METHOD_NOT_ALLOWED', 'only POST is supported');
    requireBearer(req, accepted);
    if (!isJsonMediaType(headerValue(req, 'content-type')))
      throw new ApiError(400, 'BAD_REQUEST', 'Content-Type must be application/json');
    if (malformed) throw new ApiError(400, 'BAD_REQUEST', 'body is not valid JSON');
    if (path === RESULTS_PATH) return results(body);
    if (path === RFM_PATH) return rfm(body);
    return withIdempotency(replays, headerValue(req, 'idempotency-key'), body, register);
  }

  const server = await startLoopbackServer(
    createJsonApiHandler({
      faults,
      route,
      requests,
      ...(options.bodyLimitBytes ? { bodyLimitBytes: options.bodyLimitBytes } : {}),
    }),
  );

  return {
    url: server.url,
    requests,
    faults,
    clearRequests() {
      requests.length = 0;
    },
    callbacks,
    verifications: () =>
      [...verifications.values()].map((v) => ({
        externalId: v.externalId,
        workflowId: v.workflowId,
        ...(v.callbackUrl ? { callbackUrl: v.callbackUrl } : {}),
        registeredAt: v.registeredAt,
        result: v.result,
      })),
    async complete(externalId) {
      const v = verifications.get(externalId);
      if (!v) throw new Error(`unknown verification ${externalId}`);
      await complete(v);
    },
    async redeliver(externalId) {
      const v = verifications.get(externalId);
      if (!v?.result) throw new Error(`verification ${externalId} is not complete`);
      return deliver(v, v.result);
    },
    assignIdsInCapitals(on = true) {
      capitals = on;
    },
    async close() {
      closed = true;
      for (const t of timers) clearTimeout(t);
      timers.clear();
      await server.close();
    },
  };
}
