// A JSON file an operator points the gateway at that is far larger than any real one (a JWKS is a few KB; 20,000
// documents make a manifest of ~9 MiB) stops start-up unparsed, naming the variable and the file: parsed, it would
// hold the gateway for seconds and its heap many times over. The reload's refusal is in config-reload.test.ts.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

import { startTestGateway, tempDataDir } from '../helpers/gateway.js';
import { AUDIENCE, ISSUER, signingKey } from '../helpers/jwt.js';

/** `text` padded with whitespace (still valid JSON) to one byte over `bytes`. */
const over = (text: string, bytes: number) => text + ' '.repeat(bytes + 1 - Buffer.byteLength(text));

describe('a JSON file over its bound at start-up', () => {
  it('TRUSTED_DOCUMENTS_MANIFEST over 32 MiB stops start-up, naming the variable and the file', async () => {
    const file = path.join(tempDataDir('oversized-'), 'persisted-documents.json');
    fs.writeFileSync(file, over(JSON.stringify({ Typename: 'query Typename { __typename }' }), 32 * 1024 * 1024));
    await expect(
      startTestGateway({ TRUSTED_DOCUMENTS: 'enforce', TRUSTED_DOCUMENTS_MANIFEST: file }),
    ).rejects.toMatchObject({
      name: 'ConfigError',
      variable: 'TRUSTED_DOCUMENTS_MANIFEST',
      message: `TRUSTED_DOCUMENTS_MANIFEST: ${file} line 1: the file is larger than 32 MiB (33554432 bytes), more than any such file needs`,
    });
  });

  it("an AUTH_ISSUERS entry's jwksFile over 1 MiB stops start-up, naming the variable and the file", async () => {
    const dir = tempDataDir('oversized-');
    const jwks = path.join(dir, 'idp-jwks.json');
    fs.writeFileSync(jwks, over(JSON.stringify({ keys: [(await signingKey('idp-1')).publicJwk] }), 1024 * 1024));
    const issuers = path.join(dir, 'issuers.yaml');
    fs.writeFileSync(
      issuers,
      [
        `issuers:`,
        `  - issuer: ${ISSUER}`,
        `    jwksFile: idp-jwks.json`,
        `    audience: [${AUDIENCE}]`,
        '    apps: ["*"]',
        '',
      ].join('\n'),
    );
    const failure = startTestGateway({ AUTH_ISSUERS: issuers });
    await expect(failure).rejects.toMatchObject({ name: 'ConfigError', variable: 'AUTH_ISSUERS' });
    await expect(failure).rejects.toThrow(`${jwks} line 1: the file is larger than 1 MiB (1048576 bytes)`);
  });
});
