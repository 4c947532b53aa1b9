// A file the configuration names that is a named pipe, a device or a folder stops start-up, naming the variable and
// the file. Read as a file, a pipe held the start (on the event loop) until a writer came and went, a device could
// hold it for ever, and a folder was said as unreadable (EISDIR). The reload's refusal is in config-reload.test.ts.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

import { namedPipe } from '../helpers/fifo.js';
import { gatewaysPerTest, tempDataDir } from '../helpers/gateway.js';
import { AUDIENCE, ISSUER } from '../helpers/jwt.js';

const start = gatewaysPerTest();
const SANDBOXED = { SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm' };

/** Each variable that names a file, with the rest of what it needs; `file` is where the pipe or folder goes. */
const cases: Array<[string, (dir: string, file: string) => Record<string, string>]> = [
  ['GATEWAY_APPS_FILE', (_dir, file) => ({ ...SANDBOXED, GATEWAY_APPS_FILE: file })],
  ['AUTH_ISSUERS', (_dir, file) => ({ ...SANDBOXED, AUTH_ISSUERS: file })],
  [
    'AUTH_ISSUERS',
    // The pipe is an entry's jwksFile; the issuers file itself is good.
    (dir, file) => {
      const issuers = path.join(dir, 'issuers.yaml');
      fs.writeFileSync(
        issuers,
        [
          'issuers:',
          `  - issuer: ${ISSUER}`,
          `    jwksFile: ${path.basename(file)}`,
          `    audience: [${AUDIENCE}]`,
          '    apps: ["*"]',
          '',
        ].join('\n'),
      );
      return { ...SANDBOXED, AUTH_ISSUERS: issuers };
    },
  ],
  [
    'AUTH_JWKS_FILE',
    (_dir, file) => ({
      ...SANDBOXED,
      AUTH_JWKS_FILE: file,
      AUTH_ISSUER: ISSUER,
      AUTH_AUDIENCE: AUDIENCE,
      AUTH_APPS: '*',
    }),
  ],
  [
    'MOBILEID_JWKS_FILE',
    (_dir, file) => ({
      ...SANDBOXED,
      GATEWAY_API_KEYS: 'shop:key-of-shop-0123456789',
      MOBILEID_JWKS_FILE: file,
      MOBILEID_ISSUER: 'https://mobileid.operator.example',
      MOBILEID_CLIENT_ID: 'sp-client-1',
    }),
  ],
  [
    'TRUSTED_DOCUMENTS_MANIFEST',
    (_dir, file) => ({ ...SANDBOXED, TRUSTED_DOCUMENTS: 'enforce', TRUSTED_DOCUMENTS_MANIFEST: file }),
  ],
];

describe('a configured file that is no file, at start-up', () => {
  const removals: Array<() => void> = [];
  afterEach(() => {
    for (const remove of removals.splice(0)) remove();
  });

  it.each(cases)(
    '%s naming a named pipe stops start-up at once, naming the variable and the pipe',
    async (variable, envOf) => {
      const dir = tempDataDir('not-a-file-');
      const file = path.join(dir, 'named-pipe.json');
      const pipe = namedPipe(file);
      removals.push(() => pipe.remove());
      const failure = start(envOf(dir, file));
      await expect(failure).rejects.toMatchObject({ name: 'ConfigError', variable });
      await expect(failure).rejects.toThrow(`${file}: is not a file (a folder, a pipe or a device)`);
    },
  );

  it.each(cases)('%s naming a folder stops start-up, naming the variable and the folder', async (variable, envOf) => {
    const dir = tempDataDir('not-a-file-');
    const folder = path.join(dir, 'folder.json');
    fs.mkdirSync(folder);
    const failure = start(envOf(dir, folder));
    await expect(failure).rejects.toMatchObject({ name: 'ConfigError', variable });
    await expect(failure).rejects.toThrow(`${folder}: is not a file (a folder, a pipe or a device)`);
  });

  it('TRUSTED_DOCUMENTS_MANIFEST naming a device stops start-up, naming the variable and the device', async () => {
    const failure = start({ ...SANDBOXED, TRUSTED_DOCUMENTS: 'enforce', TRUSTED_DOCUMENTS_MANIFEST: '/dev/null' });
    await expect(failure).rejects.toMatchObject({ name: 'ConfigError', variable: 'TRUSTED_DOCUMENTS_MANIFEST' });
    await expect(failure).rejects.toThrow('/dev/null: is not a file (a folder, a pipe or a device)');
  });
});
