import {
  ErrorCode,
  GatewayError,
  keptAnswerText,
  UpstreamAnswerIncompleteError,
  UpstreamRejectedError,
  type IncompleteAnswer,
} from '../errors.js';
import type { Logger, RequestLog } from '../logger.js';
import type { UpstreamHttp } from '../upstream/http.js';
import {
  masked,
  PATHS,
  scrubResponse,
  secretsOf,
  type CloudAnswers,
  type ProjectRequest,
  type ServiceCall,
} from './wire.js';

export type CloudAuth = { token: string } | { credentials: Readonly<Record<string, unknown>> };

export interface Created {
  id: string;
  /** The upstream's response, secrets removed. */
  response: unknown;
  /** The status it answered with (2xx). */
  status: number;
}

/** Refresh a fetched token this long before it expires (or at 90% of a short lifetime). */
const REFRESH_MARGIN_MS = 60_000;

/**
 * Access tokens for the cloud API (spec, Authentication): a service-account token as given, or one
 * fetched from POST /iam/v2/tokens with the credentials, cached, refreshed before expiry, and refreshed
 * once when a call is answered 401. Concurrent callers share one token request.
 */
export class CloudTokens {
  private current: { token: string; refreshAt: number } | null = null;
  private pending: Promise<string> | null = null;

  constructor(
    private readonly http: UpstreamHttp,
    private readonly auth: CloudAuth,
    private readonly logger: Logger,
    private readonly answers: CloudAnswers,
  ) {
    this.configured = 'token' in auth ? `Bearer ${auth.token}` : null;
  }

  /** `Bearer <token>` of a configured token (CLOUD_API_TOKEN), known without waiting; null with credentials. */
  readonly configured: string | null;

  /**
   * `log`: the request that needs the token. A fetch it starts logs with its logger (naming its request id); callers
   * that come while it runs share it, and its lines name the request that started it.
   */
  async get(log?: RequestLog): Promise<string> {
    if ('token' in this.auth) return this.auth.token;
    if (this.current && Date.now() < this.current.refreshAt) return this.current.token;
    this.pending ??= this.fetch(log).finally(() => {
      this.pending = null;
    });
    return this.pending;
  }

  /** The tokens this holds now (the configured one, or the one last fetched): to mask where an answer quotes them. */
  held(): string[] {
    if ('token' in this.auth) return [this.auth.token];
    return this.current ? [this.current.token] : [];
  }

  /** Drops a fetched token after a 401; true when a new one can be fetched (not for a fixed token). */
  invalidate(): boolean {
    if ('token' in this.auth) return false;
    this.current = null;
    return true;
  }

  private async fetch(log: RequestLog | undefined): Promise<string> {
    if (!('credentials' in this.auth)) throw new Error('unreachable');
    const credentials = this.auth.credentials;
    let res;
    try {
      res = await this.http.request({
        method: 'POST',
        path: PATHS.token,
        route: `POST ${PATHS.token}`,
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: credentials,
        rejectCode: (status) =>
          status === 401 || status === 403 ? ErrorCode.UPSTREAM_UNAUTHENTICATED : ErrorCode.UPSTREAM_REJECTED,
        log,
      });
    } catch (err) {
      if (!(err instanceof UpstreamRejectedError)) throw err;
      if (err.status >= 300 && err.status < 400) throw this.redirected(err, log);
      // The endpoint's answer is about the gateway's own account (and may quote its credentials): the operator's to
      // read, in the log with the credentials' values masked; the app is told the code, the upstream and the status.
      // Masked before it is written as JSON: a value quoted in a text of the answer is then found in any form.
      const said = JSON.stringify(masked(err.body ?? null, textsOf(credentials)));
      (log?.logger ?? this.logger).error(
        { upstream: err.upstream, status: err.status, answer: said },
        "the cloud token endpoint refused the gateway's credentials (CLOUD_API_CREDENTIALS)",
      );
      throw new GatewayError(
        err.code,
        `${err.upstream} refused the gateway's own credentials with status ${err.status}; its answer is in the gateway's log`,
        { upstream: err.upstream, status: err.status },
      );
    }
    const parsed = this.answers.token(res.body);
    if (!parsed) {
      throw new GatewayError(
        ErrorCode.UPSTREAM_UNAUTHENTICATED,
        `the cloud token endpoint answered without a token where the gateway reads it (${this.answers.describe().token}); set CLOUD_TOKEN_PATH to the token's JSON path`,
        {
          upstream: this.http.name,
          status: res.status,
        },
      );
    }
    const now = Date.now();
    const lifetime = parsed.expiresAt === null ? 3_600_000 : parsed.expiresAt - now;
    const refreshAt = now + Math.max(0, Math.min(lifetime - REFRESH_MARGIN_MS, lifetime * 0.9));
    this.current = { token: parsed.token, refreshAt };
    (log?.logger ?? this.logger).info(
      { upstream: this.http.name, expiresInS: Math.round(lifetime / 1000) },
      'cloud access token obtained',
    );
    return parsed.token;
  }

  /**
   * A redirect answering the token request is no verdict on the credentials: the endpoint has moved, or something
   * before it redirects (http where https is served, a proxy's sign-in page). It is not followed (its Location may be
   * another host, which the credentials must not reach), as a creation's is not (src/upstream/http.ts), and it is said
   * as what it is, so that the operator checks the address rather than rotates credentials that are fine. Its status
   * alone is logged: the Location and the body may carry a ticket. The code stays the one of any 3xx answering a
   * request that is no creation (docs/contract.md, UPSTREAM_REJECTED); nothing was sent to the cloud.
   */
  private redirected(err: UpstreamRejectedError, log: RequestLog | undefined): GatewayError {
    (log?.logger ?? this.logger).error(
      { upstream: err.upstream, status: err.status },
      'the cloud token endpoint answered with a redirect, not followed: its address (CLOUD_API_URL) is not where the endpoint answers, or a proxy before it redirects; the credentials were not judged',
    );
    return new GatewayError(
      err.code,
      `${err.upstream} answered the token request with a redirect (HTTP ${err.status}), which the gateway does not follow; nothing was sent to the cloud, and the gateway's log says more`,
      { upstream: err.upstream, status: err.status },
    );
  }
}

/**
 * The headers of a creation request, except `authorization: Bearer <token>`, which is added per attempt (a
 * fetched token may be refreshed between attempts). Plans show these same headers.
 */
export function creationHeaders(accept: boolean, idempotencyKey: string): Record<string, string> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (accept) headers.accept = 'application/json';
  headers['idempotency-key'] = idempotencyKey;
  return headers;
}

/** A creation's refusal: 401 says the gateway's credentials were refused, any other 4xx the request. */
function creationRejectCode(status: number): ErrorCode {
  return status === 401 ? ErrorCode.UPSTREAM_UNAUTHENTICATED : ErrorCode.UPSTREAM_REJECTED;
}

/** The cloud provisioning API: two creation endpoints, each with an Idempotency-Key. */
export class CloudClient {
  constructor(
    private readonly http: UpstreamHttp,
    private readonly tokens: CloudTokens,
    readonly answers: CloudAnswers,
  ) {}

  /**
   * The authorization of every attempt, and the refresh after a 401 (made once, not per call). `log`: the call's
   * request, which a token fetch it starts logs with.
   */
  private readonly authorize = (
    log: RequestLog | undefined,
  ): Record<string, string> | Promise<Record<string, string>> => {
    const configured = this.tokens.configured;
    if (configured !== null) return { authorization: configured };
    return this.tokens.get(log).then((token) => ({ authorization: `Bearer ${token}` }));
  };

  private readonly onUnauthorized = async (): Promise<boolean> => this.tokens.invalidate();

  /**
   * The created resource of a kept answer (UPSTREAM_ANSWER_INCOMPLETE), read again with the paths configured now;
   * the same error when its id still cannot be read.
   */
  reread(incomplete: IncompleteAnswer): Created {
    const id = this.answers.createdId(incomplete.answer);
    if (!id) throw new UpstreamAnswerIncompleteError({ ...incomplete, lookedFor: this.answers.describe().createdId });
    return { id, response: incomplete.answer, status: incomplete.status };
  }

  /**
   * UPSTREAM_ANSWER_INCOMPLETE for a creation whose id, as read from its answer, the ledger holds for another creation:
   * the resource exists upstream, but recorded under that id it would be lost behind the other one. Its answer is kept
   * as any unreadable one (`reread`), in case the id was read from the wrong field.
   */
  alreadyRecorded(created: Created): UpstreamAnswerIncompleteError {
    return new UpstreamAnswerIncompleteError({
      upstream: this.http.name,
      status: created.status,
      missing: `a new id (the id read, ${created.id}, is one the gateway already recorded for another creation)`,
      lookedFor: this.answers.describe().createdId,
      variable: 'CLOUD_CREATED_ID_PATH',
      answer: created.response,
    });
  }

  /** `log`: the request the creation serves, whose logger writes what the call logs (UpstreamRequest.log). */
  createProject(body: ProjectRequest, idempotencyKey: string, log?: RequestLog): Promise<Created> {
    return this.create(PATHS.projects, body, idempotencyKey, false, log);
  }

  createService(call: ServiceCall, idempotencyKey: string, log?: RequestLog): Promise<Created> {
    return this.create(PATHS.services, call.envelope, idempotencyKey, call.accept, log);
  }

  private async create(
    path: string,
    body: unknown,
    idempotencyKey: string,
    accept: boolean,
    log: RequestLog | undefined,
  ): Promise<Created> {
    let res;
    try {
      res = await this.http.request({
        method: 'POST',
        path,
        route: `POST ${path}`,
        headers: creationHeaders(accept, idempotencyKey),
        body,
        authorize: this.authorize,
        onUnauthorized: this.onUnauthorized,
        rejectCode: creationRejectCode,
        log,
      });
    } catch (err) {
      // A refusal may quote the request it refused, passwords included: its text reaches the app, a provisioning's
      // stored error and an agent plan's outcome, so the request's secrets are masked in it here, where it arrives.
      if (!(err instanceof UpstreamRejectedError)) throw err;
      const secrets = secretsOf(body);
      if (secrets.length === 0) throw err;
      const refusal = new UpstreamRejectedError(err.upstream, err.status, masked(err.body, secrets), err.code);
      refusal.mayHaveApplied = err.mayHaveApplied;
      throw refusal;
    }
    // The id is read from the answer as it came: the masking below replaces the request's passwords wherever a text
    // of the answer quotes them, and a short password ("-", "4") is inside every UUID, which would then read as
    // another id (spec, Resources: the ids are taken from the creation responses and reused). The masking leaves a
    // text that is a whole UUID as it is (src/upstream/masked.ts), so that a kept answer read again (`reread`) gives
    // the same id as this one.
    const id = this.answers.createdId(res.body);
    let response = scrubResponse(res.body, body);
    if (!id) {
      // Kept and shown to the app: an echo of the Authorization header would keep the gateway's token in clear.
      response = masked(response, this.tokens.held());
      // A 2xx is a creation (spec, Endpoints: "the created resource, including its UUID"): the resource exists
      // upstream even when its id is not where the gateway reads it, so the answer is kept, never dropped.
      throw new UpstreamAnswerIncompleteError({
        upstream: this.http.name,
        status: res.status,
        missing: 'the created id',
        lookedFor: this.answers.describe().createdId,
        variable: 'CLOUD_CREATED_ID_PATH',
        answer: keptAnswerText(response),
      });
    }
    return { id, response, status: res.status };
  }
}

/** Every text a value holds (a credentials object's values, to mask where they are quoted). */
function textsOf(value: unknown): string[] {
  if (typeof value === 'string') return value === '' ? [] : [value];
  if (!value || typeof value !== 'object') return [];
  return Object.values(value).flatMap(textsOf);
}
