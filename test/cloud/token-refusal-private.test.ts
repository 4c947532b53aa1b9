// The cloud's token endpoint refusing the gateway's own credentials is the operator's business, not an app's
// (docs/contract.md, UPSTREAM_UNAUTHENTICATED: "the upstream refused the gateway's own credentials"). The app is told
// that code with the upstream and its status, and nothing of the endpoint's answer: an identity service's answer about
// the gateway's account (its key id, what it holds, or the credentials it echoes) is not an app's to read. The
// operator finds the answer in the log, the credentials' values masked.
import { describe, expect, it } from 'vitest';

import { TOKEN_PATH } from '../../src/sandbox/cloud.js';
import { M } from '../helpers/cloud.js';
import { gatewaysPerTest } from '../helpers/gateway.js';

const gateway = gatewaysPerTest();
const KEY_ID = 'gateway-key-id-4c1d';
const SECRET = 'SECRET-gateway-credential-9b2e77';

describe("the cloud token endpoint refusing the gateway's credentials", () => {
  it.each([401, 403, 400])(
    'a %i reaches the app as its code and status alone, and the operator in full',
    async (status) => {
      const gw = await gateway({ CLOUD_API_CREDENTIALS: JSON.stringify({ keyId: KEY_ID, secret: SECRET }) });
      gw.gateway.sandbox.cloud!.faults.enqueueFor(TOKEN_PATH, {
        status,
        body: { code: 'REFUSED', details: `key ${KEY_ID} with secret ${SECRET} is revoked for account acme-prod` },
      });
      const res = await gw.graphql(M.project, { input: { name: 'token-refused' } });
      const error = res.errors![0]!;
      expect(error.extensions).toMatchObject({
        code: status === 400 ? 'UPSTREAM_REJECTED' : 'UPSTREAM_UNAUTHENTICATED',
        upstream: 'cloud-token',
        status,
      });
      const answered = JSON.stringify(res);
      for (const word of [SECRET, KEY_ID, 'acme-prod', 'revoked']) expect(answered).not.toContain(word);
      expect(gw.gateway.sandbox.cloud!.projects()).toHaveLength(0);
      // The operator reads what the endpoint said, without the credentials' values.
      const logs = gw.logs();
      expect(logs).toContain('acme-prod');
      expect(logs).not.toContain(SECRET);
    },
  );
});
