// A redirect (3xx) answering the cloud's token request is no refusal of the gateway's credentials: the endpoint has
// moved, or sits behind something that redirects (http where https is served, a proxy's sign-in page), and the
// credentials were never judged. It is not followed (its Location may be another host, which the credentials must not
// reach), nor said as "credentials refused", which sent the operator to rotate a key that was fine: the app is told
// UPSTREAM_REJECTED with the upstream and the status (docs/contract.md: a 3xx answering anything but a creation) in
// words that name the redirect, the operator reads one error line that says so, and nothing reaches the cloud. Once
// the endpoint answers again, the same call with the same key creates the project once.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import { TOKEN_PATH } from '../../src/sandbox/cloud.js';
import { M } from '../helpers/cloud.js';
import { gatewaysPerTest, logLines } from '../helpers/gateway.js';

const gateway = gatewaysPerTest();
const CREDENTIALS = JSON.stringify({ keyId: 'gateway-key-id-7a01', secret: 'SECRET-gateway-credential-51c3' });
const LOCATION = 'https://sso.example/login?continue=%2Fiam%2Fv2%2Ftokens&ticket=ST-4d5e6f';

describe('the cloud token endpoint answering with a redirect', () => {
  it.each([301, 302, 303, 307, 308])(
    'a %i is said as a redirect, not followed, and not as refused credentials; the retry with the same key creates once',
    async (status) => {
      const gw = await gateway({ CLOUD_API_CREDENTIALS: CREDENTIALS });
      const cloud = gw.gateway.sandbox.cloud!;
      cloud.faults.enqueueFor(TOKEN_PATH, { status, headers: { location: LOCATION }, body: { moved: LOCATION } });
      const key = randomUUID();

      const res = await gw.graphql(M.project, { input: { name: 'token-redirected' }, key });
      const error = res.errors![0]!;
      expect(error.extensions).toMatchObject({ code: 'UPSTREAM_REJECTED', upstream: 'cloud-token', status });
      expect(error.message).toContain(`answered the token request with a redirect (HTTP ${status})`);
      expect(error.message).not.toContain('credentials');
      expect(JSON.stringify(res)).not.toContain('ST-4d5e6f');
      expect(cloud.projects()).toHaveLength(0);

      const said = logLines<Record<string, unknown>>(gw, (l) => l.upstream === 'cloud-token' && l.status === status);
      expect(said).toEqual([
        expect.objectContaining({
          level: 50,
          msg: 'the cloud token endpoint answered with a redirect, not followed: its address (CLOUD_API_URL) is not where the endpoint answers, or a proxy before it redirects; the credentials were not judged',
        }),
      ]);
      expect(gw.logs()).not.toContain("refused the gateway's credentials");
      expect(gw.logs()).not.toContain('ST-4d5e6f');

      const again = await gw.graphql(M.project, { input: { name: 'token-redirected' }, key });
      expect(again.errors, JSON.stringify(again.errors)).toBeUndefined();
      expect(cloud.projects()).toHaveLength(1);
    },
  );
});
