import type { ShapePaths } from '../config/json-path.js';
import { badUserInput, ErrorCode, keptAnswerText, UpstreamAnswerIncompleteError } from '../errors.js';
import type { RequestLog } from '../logger.js';
import type { UpstreamHttp } from '../upstream/http.js';
import { masked } from '../upstream/masked.js';
import {
  describeIdentityShapes,
  identificationAnswerSecrets,
  parseIdentificationResponse,
  parseRegistration,
  parseResults,
  PATHS,
  resultsRequest,
  type IdentificationEnvironment,
  type IdentificationLink,
  type IdentificationRequest,
  type Registration,
  type RegistrationRequest,
  type VerificationResultItem,
} from './wire.js';

/**
 * Upstream 4xx of the identity interfaces (spec: Errors of the identification creation call). The
 * verification endpoints' errors are not shown; the same mapping is applied to them.
 */
export function identityRejectCode(status: number): ErrorCode {
  switch (status) {
    case 400:
      return ErrorCode.BAD_USER_INPUT;
    case 401:
    case 403:
      return ErrorCode.UPSTREAM_UNAUTHENTICATED;
    case 404:
      return ErrorCode.NOT_FOUND;
    case 409:
      return ErrorCode.CONFLICT;
    default:
      return ErrorCode.UPSTREAM_REJECTED;
  }
}

function bearer(token: string | undefined): Record<string, string> {
  return token ? { authorization: `Bearer ${token}` } : {};
}

export interface CreatedIdentification {
  /** What the answer says. */
  link: IdentificationLink;
  /** The upstream's answer as it arrived. */
  response: unknown;
  /** The 2xx status it was answered with. */
  httpStatus: number;
}

/** One environment of the identification interface: its base address and its ACCESS_TOKEN. */
export interface IdentificationEndpoint {
  http: UpstreamHttp;
  token: string | undefined;
}

/** The identification interface, one base address and token per environment (spec: Addresses). */
export class IdentificationClient {
  constructor(
    private readonly environments: Readonly<Record<IdentificationEnvironment, IdentificationEndpoint | null>>,
  ) {}

  /** The endpoint's name when it is not known to honour Idempotency-Key (UpstreamHttp.unrepeatable). */
  unrepeatable(environment: IdentificationEnvironment): string | undefined {
    return this.environments[environment]?.http.unrepeatable;
  }

  /** `log`: the request the call serves, whose logger writes what the call logs (UpstreamRequest.log). */
  async create(
    environment: IdentificationEnvironment,
    body: IdentificationRequest,
    idempotencyKey: string,
    log?: RequestLog,
  ): Promise<CreatedIdentification> {
    const endpoint = this.environments[environment];
    if (!endpoint) {
      throw badUserInput(
        'input.environment',
        `${environment} is not configured on this gateway (set IDENTIFICATION_PRODLIKE_API_URL)`,
      );
    }
    const { http, token } = endpoint;
    const res = await http.request({
      method: 'POST',
      path: PATHS.identifications,
      route: `POST ${PATHS.identifications}`,
      // Spec, Endpoints: "Authorization: Bearer <ACCESS_TOKEN>, Content-Type: application/json".
      headers: { 'content-type': 'application/json', 'idempotency-key': idempotencyKey, ...bearer(token) },
      body,
      rejectCode: identityRejectCode,
      log,
    });
    const link = parseIdentificationResponse(res.body);
    // A 2xx created the request even when its id cannot be read (docs/decisions/042): the answer is kept with the key,
    // so that a retry reads it again instead of creating a second request.
    if (!link) throw this.incomplete(environment, res.status, res.body, body, 'the id of the request it created');
    return { link, response: res.body, httpStatus: res.status };
  }

  /**
   * The refusal of a creation answered with an id the gateway already recorded for another creation (the two
   * environments are two platforms, whose ids may meet): it cannot be stored under that id, so its answer is kept with
   * the key as an unreadable one's is, and the first record stays as it was.
   */
  alreadyRecorded(
    environment: IdentificationEnvironment,
    created: CreatedIdentification,
    sent: IdentificationRequest,
  ): UpstreamAnswerIncompleteError {
    return this.incomplete(
      environment,
      created.httpStatus,
      created.response,
      sent,
      `a new id (the id read, ${created.link.id}, is one the gateway already recorded for another creation)`,
    );
  }

  /**
   * UPSTREAM_ANSWER_INCOMPLETE for a 2xx `answer`: what is sealed at rest on a recorded identification (the link, its
   * short id, the applicant's id, the redirect) and the token are masked in the answer kept.
   */
  private incomplete(
    environment: IdentificationEnvironment,
    status: number,
    answer: unknown,
    sent: IdentificationRequest,
    missing: string,
  ): UpstreamAnswerIncompleteError {
    const endpoint = this.environments[environment]!;
    const secrets = [...identificationAnswerSecrets(answer, sent), ...(endpoint.token ? [endpoint.token] : [])];
    return new UpstreamAnswerIncompleteError({
      upstream: endpoint.http.name,
      status,
      missing,
      lookedFor: 'id',
      variable: null,
      answer: keptAnswerText(masked(answer, secrets)),
    });
  }
}

export interface RegisteredVerification extends Registration {
  response: unknown;
  /** The 2xx status it was answered with. */
  httpStatus: number;
}

/** The verification interface (JWT bearer) and the rfm check beside it. */
export class VerificationClient {
  constructor(
    private readonly http: UpstreamHttp,
    private readonly token: string | undefined,
    private readonly rfm: { http: UpstreamHttp; token: string | undefined },
    private readonly paths: Pick<
      ShapePaths,
      'verificationExternalId' | 'verificationResults' | 'verificationCallbackUrl'
    >,
  ) {}

  /** `value` with this client's bearer token masked wherever a text quotes it (an answer kept, which an echo may hold). */
  withoutToken<T>(value: T): T {
    return this.token ? masked(value, [this.token]) : value;
  }

  /** The verification id in a registration answer (VERIFICATION_EXTERNAL_ID_PATH or the guesses); also for a kept answer. */
  externalIdOf(answer: unknown): string | null {
    return parseRegistration(answer, this.paths.verificationExternalId).externalId;
  }

  /** The registration endpoint's name when it is not known to honour Idempotency-Key (UpstreamHttp.unrepeatable). */
  get unrepeatable(): string | undefined {
    return this.http.unrepeatable;
  }

  /** `log` of each call: the request it serves, whose logger writes what the call logs (UpstreamRequest.log). */
  async register(body: RegistrationRequest, idempotencyKey: string, log?: RequestLog): Promise<RegisteredVerification> {
    const res = await this.http.request({
      method: 'POST',
      path: PATHS.verifications,
      route: `POST ${PATHS.verifications}`,
      headers: { 'content-type': 'application/json', 'idempotency-key': idempotencyKey, ...bearer(this.token) },
      body,
      rejectCode: identityRejectCode,
      log,
    });
    return {
      ...parseRegistration(res.body, this.paths.verificationExternalId),
      response: res.body,
      httpStatus: res.status,
    };
  }

  /**
   * One POST for all the ids; the caller splits batches. Ids the upstream does not answer are absent from `byId`;
   * `byId` is null when the answer holds no list the gateway can read (wire.ts parseResults), which is logged once for
   * the operator, naming where the gateway looked and the variable to set, never the answer (it may hold personal
   * data).
   */
  async results(
    externalIds: readonly string[],
    log: RequestLog,
  ): Promise<{ status: number; byId: Map<string, VerificationResultItem> | null }> {
    const route = `POST ${PATHS.results}`;
    const res = await this.http.request({
      method: 'POST',
      path: PATHS.results,
      route,
      headers: { 'content-type': 'application/json', ...bearer(this.token) },
      body: resultsRequest(externalIds),
      rejectCode: identityRejectCode,
      // A lookup changes nothing upstream: any transient failure may be retried.
      readOnly: true,
      log,
    });
    const byId = parseResults(res.body, this.paths.verificationResults);
    if (byId === null) {
      const body = res.body;
      log.logger.warn(
        {
          upstream: this.http.name,
          route,
          status: res.status,
          ids: externalIds.length,
          // The kind of JSON value only: its members may name applicants.
          answerType: body === null ? 'null or empty' : Array.isArray(body) ? 'array' : typeof body,
          lookedFor: describeIdentityShapes(this.paths).results,
          variable: 'VERIFICATION_RESULTS_PATH',
        },
        'verification results answer holds no list the gateway can read; each id asked is answered UPSTREAM_ANSWER_INCOMPLETE: set VERIFICATION_RESULTS_PATH to the JSON path of the list',
      );
    }
    return { status: res.status, byId };
  }

  async checkRfm(body: unknown, idempotencyKey: string, log?: RequestLog): Promise<unknown> {
    const res = await this.rfm.http.request({
      method: 'POST',
      path: PATHS.rfm,
      route: `POST ${PATHS.rfm}`,
      headers: { 'content-type': 'application/json', 'idempotency-key': idempotencyKey, ...bearer(this.rfm.token) },
      body,
      rejectCode: identityRejectCode,
      log,
    });
    return res.body;
  }
}
