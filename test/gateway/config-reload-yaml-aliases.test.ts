// An apps file whose YAML aliases expand past what the YAML library allows (a file written with anchors, or one meant
// to exhaust memory): refused like any other bad file, naming the variable, the file and the line, at start-up and on
// a reload (422 reload_failed, the running apps kept), never an unexpected error.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';

import { configRefusal, startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';

const SRE_KEY = 'sre-key-0123456789abcdef';
const digest = (key: string) => createHash('sha256').update(key).digest('hex');
const good = [
  'apps:',
  '  - name: sre',
  '    scopes: [operator, cloud:read]',
  `    keys: [{ sha256: ${digest(SRE_KEY)} }]`,
  '',
];
/** Valid YAML: a list repeated through aliases, a thousand times over. */
const aliased = ['x: &a [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]', `apps: [${'*a, '.repeat(1000)}]`, ''].join('\n');

const running: TestGateway[] = [];
afterAll(async () => {
  for (const g of running.splice(0)) await g.close();
});

describe('an apps file of too many YAML aliases', () => {
  it('stops start-up naming the variable, the file and the line', () => {
    const file = path.join(tempDataDir(), 'apps.yaml');
    fs.writeFileSync(file, aliased);
    const message = configRefusal({ GATEWAY_APPS_FILE: file });
    expect(message).toContain(`GATEWAY_APPS_FILE: ${file} line 2:`);
    expect(message).toContain('alias');
  });

  it('is refused by a reload with 422 reload_failed, and the running apps are kept', async () => {
    const dir = tempDataDir();
    const file = path.join(dir, 'apps.yaml');
    fs.writeFileSync(file, good.join('\n'));
    const t = await startTestGateway({ GATEWAY_APPS_FILE: file, DATA_DIR: dir });
    running.push(t);
    fs.writeFileSync(file, aliased);
    const res = await request(`${t.url}/admin/reload`, {
      method: 'POST',
      headers: { authorization: `Bearer ${SRE_KEY}` },
    });
    const body = (await res.body.json()) as Record<string, unknown>;
    expect(res.statusCode).toBe(422);
    expect(body).toMatchObject({ error: 'reload_failed', variable: 'GATEWAY_APPS_FILE', file, line: 2 });
    expect(t.logs()).toContain('configuration reload refused');
    expect((await t.graphql('{ __typename }', undefined, { key: SRE_KEY })).status).toBe(200);
  });
});
