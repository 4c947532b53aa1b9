// A replica that starts once the retention purge has emptied the log (PostgreSQL) has delivered none of the purged
// numbers, and needs none of them: a cursor it hands out afterwards lost nothing, and resumes. It used to start its
// positions at 0, below the purge's watermark, so that every cursor it handed out until its hole was given up (a
// minute and a later event) was refused `expired` by the next resume. Embedded PostgreSQL, the gateway restarted on
// the same database, the purge run on the log.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import {
  mcpCursorResumes,
  postCompletion,
  registerVerifications,
  resumesFromALiveCursor,
} from '../helpers/resumable.js';

const KEY = 'key-purged-log-restart-0123456789';
const HOUR_MS = 3_600_000;

describe('a replica started after the purge emptied the log (PostgreSQL)', () => {
  let pg: TestPostgres;
  let t: TestGateway | undefined;
  let env: Record<string, string>;
  let callback: { id: string; url: string };

  beforeAll(async () => {
    pg = await startPostgres();
    env = {
      DATABASE_URL: await pg.createDatabase('purged_restart'),
      TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
      GATEWAY_API_KEYS: `purged:${KEY}`,
      EVENT_RETENTION: '1h',
      SANDBOX_CALLBACK_DELAY_MS: '600000',
    };
    t = await startTestGateway(env);
    const [id, url] = [...(await registerVerifications(t, t.gateway.sandbox.verification!, KEY, 1))][0]!;
    await postCompletion(url, id, 'p1');
    await postCompletion(url, id, 'p2');
    const log = t.gateway.services.events.log;
    expect(await log.purgeExpired(Date.now() + HOUR_MS + 60_000)).toBeGreaterThan(0);
    expect(await log.purgedThrough()).toBeGreaterThan(0);
    await t.close();
    t = await startTestGateway(env);
    callback = { id, url: `${t.url}${new URL(url).pathname}` };
  }, 120_000);

  afterAll(async () => {
    await t?.close();
    await pg?.stop();
  });

  it('resumes from the cursor MCP wait_for_events hands out with nothing to read', async () => {
    await mcpCursorResumes(t!, KEY);
  });

  it('resumes over graphql-ws from the cursor of an event logged after the restart', async () => {
    await resumesFromALiveCursor(t!, KEY, callback, 'p3', 'p4');
  });
});
