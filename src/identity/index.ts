import { sandboxedUpstreams, type Config } from '../config.js';
import type { Events } from '../events/index.js';
import { SANDBOX_IDENTIFICATION_TOKEN, SANDBOX_VERIFICATION_TOKEN, type Sandboxes } from '../sandbox/index.js';
import type { Store } from '../store/index.js';
import type { Ledger } from '../store/ledger.js';
import type { UpstreamHttp } from '../upstream/http.js';
import type { Idempotency } from '../upstream/idempotency.js';
import { VerificationCallbacks } from './callbacks.js';
import { IdentificationClient, VerificationClient } from './client.js';
import { IdentityService } from './service.js';

export { IdentityService } from './service.js';

/**
 * Builds the identity service from the config: a configured URL and token, or the embedded sandbox and
 * its token. Called by the composition root; `upstream` creates one pooled client per base address.
 */
export function createIdentityService(deps: {
  config: Config;
  sandbox: Sandboxes;
  store: Store;
  ledger: Ledger;
  idempotency: Idempotency;
  events: Events;
  upstream: (name: string, baseUrl: string) => UpstreamHttp;
  publicUrl: () => string;
}): IdentityService {
  const { config, sandbox } = deps;
  const sandboxed = sandboxedUpstreams(config);
  const sandboxUrl = (s: { url: string } | null, what: string): string => {
    if (!s) throw new Error(`the ${what} sandbox was not started`);
    return s.url;
  };

  const production = deps.upstream('identification', config.identification.url ?? sandboxUrl(sandbox.identification, 'identification'));
  const prodlikeUrl = config.identification.prodlikeUrl ?? (sandboxed.identification ? sandboxUrl(sandbox.identificationProdlike, 'identification PRODLIKE') : null);
  const prodlike = prodlikeUrl ? deps.upstream('identification-prodlike', prodlikeUrl) : null;
  const identificationToken = config.identification.token ?? (sandboxed.identification ? SANDBOX_IDENTIFICATION_TOKEN : undefined);
  // PRODLIKE has its own token when one is configured; otherwise the production one (DESIGN.md, Configuration).
  const prodlikeToken = config.identification.prodlikeToken ?? identificationToken;

  const verificationToken = config.verification.token ?? (sandboxed.verification ? SANDBOX_VERIFICATION_TOKEN : undefined);
  const verification = deps.upstream('verification', config.verification.url ?? sandboxUrl(sandbox.verification, 'verification'));
  // The rfm check sits beside the verification interface and uses its JWT; a sandboxed rfm check next to a
  // real verification interface gets the sandbox's token instead of the real one.
  const rfmToken = sandboxed.rfm && !sandboxed.verification ? SANDBOX_VERIFICATION_TOKEN : verificationToken;
  const rfm = deps.upstream('rfm', config.rfmUrl ?? sandboxUrl(sandbox.verification, 'verification (rfm)'));

  return new IdentityService({
    identification: new IdentificationClient({
      PRODUCTION: { http: production, token: identificationToken },
      PRODLIKE: prodlike ? { http: prodlike, token: prodlikeToken } : null,
    }),
    verification: new VerificationClient(verification, verificationToken, { http: rfm, token: rfmToken }),
    ledger: deps.ledger,
    idempotency: deps.idempotency,
    callbacks: new VerificationCallbacks(deps.store.db),
    events: deps.events,
    publicUrl: deps.publicUrl,
  });
}
