import type { ShapePaths } from '../config/json-path.js';
import type { Events } from '../events/index.js';
import type { AppStorage } from '../store/app-storage.js';
import type { Store } from '../store/index.js';
import type { Ledger } from '../store/ledger.js';
import type { UpstreamHttp } from '../upstream/http.js';
import type { Idempotency } from '../upstream/idempotency.js';
import { CallbackBodies, VerificationCallbacks } from './callbacks.js';
import { IdentificationClient, VerificationClient } from './client.js';
import { IdentificationCompletions } from './completions.js';
import { IdentificationCallbacks, REMEMBERED_ADDRESSES } from './identification-callbacks.js';
import { IdentityService, type IdentitySecret } from './service.js';

export { IdentityService } from './service.js';

interface Endpoint {
  readonly url: string;
  readonly token: string;
}

/** The identity interfaces' addresses and tokens (the composition root resolves them). */
export interface IdentityEndpoints {
  /** PRODUCTION, and PRODLIKE when one is configured (otherwise that environment is refused). */
  readonly identification: Endpoint & { readonly prodlike: Endpoint | null };
  readonly verification: Endpoint;
  /** The rfm check: by default the verification interface's address and JWT (spec: Endpoints, Versioning). */
  readonly rfm: Endpoint;
}

/**
 * The identity service over its endpoints; `http` creates one pooled client per base address. Like the
 * cloud and mobile-ID factories, it never learns whether a simulator stands behind an address.
 */
export function createIdentityService(
  endpoints: IdentityEndpoints,
  deps: {
    http: (name: string, baseUrl: string) => UpstreamHttp;
    store: Store;
    ledger: Ledger;
    idempotency: Idempotency;
    events: Events;
    publicUrl: () => string;
    /** The *_PATH variables: where answers and requests carry what the spec does not show. */
    shapePaths: ShapePaths;
    /** The gateway's secret: callback tokens are a keyed digest of the upstream idempotency key; rfm answers and identification links are sealed with it. */
    secret: IdentitySecret;
    /** Told each identification callback address issued (the composition root configures a simulator with it). */
    onCallbackAddress?: (workflowId: string, url: string) => void;
    /** Per-app storage bounds (callback events, callback addresses); null: none. */
    storage: AppStorage | null;
    /** CALLBACK_BODY_KEPT_BYTES. */
    callbackBodyKeptBytes: number;
    /** Counts a callback body kept only in part, by kind. */
    onTruncated?: (kind: string) => void;
    /** The gateway's clock (GatewayTesting.clock); default Date.now. */
    now?: (() => number) | undefined;
  },
): IdentityService {
  const { identification, verification, rfm } = endpoints;
  const bodies = new CallbackBodies(deps.secret, deps.storage, deps.callbackBodyKeptBytes, deps.onTruncated);
  return new IdentityService({
    secret: deps.secret,
    identification: new IdentificationClient({
      PRODUCTION: { http: deps.http('identification', identification.url), token: identification.token },
      PRODLIKE: identification.prodlike
        ? {
            http: deps.http('identification-prodlike', identification.prodlike.url),
            token: identification.prodlike.token,
          }
        : null,
    }),
    verification: new VerificationClient(
      deps.http('verification', verification.url),
      verification.token,
      { http: deps.http('rfm', rfm.url), token: rfm.token },
      deps.shapePaths,
    ),
    ledger: deps.ledger,
    idempotency: deps.idempotency,
    callbacks: new VerificationCallbacks(deps.store.db, deps.store.dialect, deps.secret, deps.now),
    identificationCompletions: new IdentificationCompletions({
      callbacks: new IdentificationCallbacks(
        deps.store.db,
        (text) => deps.secret.digest(text),
        REMEMBERED_ADDRESSES,
        deps.storage,
        deps.now,
      ),
      bodies,
      ledger: deps.ledger,
      events: deps.events,
      publicUrl: deps.publicUrl,
      ...(deps.onCallbackAddress ? { onIssued: deps.onCallbackAddress } : {}),
    }),
    bodies,
    events: deps.events,
    publicUrl: deps.publicUrl,
    shapePaths: deps.shapePaths,
    now: deps.now,
  });
}
