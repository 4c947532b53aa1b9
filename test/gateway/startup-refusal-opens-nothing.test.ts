// A configuration the gateway refuses stops the start (exit 2, a message naming the variable) before anything is
// opened: the files a start reads and checks (the JWKS files, the trusted-documents manifest) are checked before the
// database is created or migrated and before a key is written into DATA_DIR. Real processes (node src/main.ts).
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

import { tempDataDir } from '../helpers/gateway.js';
import { runMainUntilReady } from '../helpers/process.js';

/** A JWKS file that holds no key: refused at start as at a reload. */
const EMPTY_JWKS = '{ "keys": [] }\n';

const CASES: Array<{ variable: string; env: (dir: string) => Record<string, string> }> = [
  {
    variable: 'AUTH_JWKS_FILE',
    env: (dir) => ({
      AUTH_JWKS_FILE: write(dir, 'jwks.json', EMPTY_JWKS),
      AUTH_ISSUER: 'https://idp.example.test/realms/acme',
      AUTH_AUDIENCE: 'gateway',
      AUTH_APPS: '*',
    }),
  },
  {
    variable: 'MOBILEID_JWKS_FILE',
    env: (dir) => ({
      MOBILEID_JWKS_FILE: write(dir, 'mobile-jwks.json', EMPTY_JWKS),
      MOBILEID_ISSUER: 'https://mobileid.operator.example',
      MOBILEID_CLIENT_ID: 'sp-client-1',
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
      GATEWAY_API_KEYS: 'startup-refusal-key',
    }),
  },
  {
    variable: 'TRUSTED_DOCUMENTS_MANIFEST',
    env: (dir) => ({
      TRUSTED_DOCUMENTS: 'enforce',
      TRUSTED_DOCUMENTS_MANIFEST: write(dir, 'persisted-documents.json', '{ "sha256:abc": "query { noSuchField }" }\n'),
    }),
  },
];

function write(dir: string, name: string, text: string): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, text);
  return file;
}

describe('a start refused by a bad file', () => {
  it.each(CASES)('$variable: exit 2 naming it, and nothing written to DATA_DIR', async ({ variable, env }) => {
    const files = tempDataDir('startup-refusal-files-');
    const dataDir = tempDataDir('startup-refusal-data-');
    const { code, output } = await runMainUntilReady({ DATA_DIR: dataDir, ...env(files) });
    expect(output).toContain(`gateway: invalid configuration: ${variable}: `);
    expect(code).toBe(2);
    // No database made or migrated, no key generated, no lock taken.
    expect(fs.readdirSync(dataDir)).toEqual([]);
  });
});
