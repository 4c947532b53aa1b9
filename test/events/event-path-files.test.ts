// The webhook-to-subscriber path, counted: the gateway's source files whose code runs between a mobile-ID
// notification's arrival and its subscriber's `next` (V8's precise coverage, the same process as the gateway). The
// path is drawn in docs/architecture.md with this count; a change that makes the path cross more files fails here
// and says which, so the drawing and the count move together.
import inspector from 'node:inspector/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { collect, postNotification, SUBSCRIPTION, wsClient } from '../helpers/mobile-id.js';
import { waitForSubscribers } from '../helpers/wait.js';

/**
 * What docs/architecture.md says the path crosses: 30 files after the stream redesign (decision 067), which removed
 * layers inside files rather than files (the review at 1d92c88 also counted 30, by a method it did not record); 31
 * since a written log line's secret-named fields are redacted at any depth by the gateway's own code (src/logger.ts),
 * where pino's fixed paths ran in pino: the notification's info line ("stored") is written on the path; 32 since each
 * app's live subscriptions are bounded (src/ratelimit/live-subscriptions.ts): the subscription the path completes gives
 * its place back. The aim is 20 where folding small relays reads better; this ceiling keeps the path from growing
 * meanwhile.
 */
const MOST_FILES = 32;

describe('the mobile-ID webhook to graphql-ws path', () => {
  let gw: TestGateway;
  const session = new inspector.Session();

  beforeAll(async () => {
    // At the level operators run by default (the test helper's is debug): the lines written are production's.
    gw = await startTestGateway({ LOG_LEVEL: 'info' });
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
  });
  afterAll(async () => {
    await session.post('Profiler.stopPreciseCoverage');
    session.disconnect();
    await gw?.gateway.close();
  });

  /** One notification to one waiting subscriber; returns the gateway's source files that ran meanwhile. */
  async function deliver(authReqId: string): Promise<string[]> {
    const client = wsClient(gw);
    try {
      const sub = collect(client, SUBSCRIPTION, { id: authReqId });
      await waitForSubscribers(gw, 'mobile-id', authReqId, 1);
      await session.post('Profiler.takePreciseCoverage'); // resets the counts
      const res = await postNotification(gw, {
        auth_req_id: authReqId,
        error: 'access_denied',
        error_description: 'the user declined',
      });
      expect(res.status, res.text).toBe(204);
      await sub.done;
      const { result } = await session.post('Profiler.takePreciseCoverage');
      expect(sub.results).toHaveLength(1);
      const src = fileURLToPath(new URL('../../src/', import.meta.url));
      // With PATH_FUNCTIONS set, it prints which functions of each file ran, and how often: where to look for relays.
      if (process.env.PATH_FUNCTIONS)
        for (const script of result)
          if (script.url.includes('/src/'))
            console.log(
              script.url.split('/src/')[1],
              script.functions
                .filter((f) => f.ranges[0]!.count > 0)
                .map((f) => `${f.functionName}×${f.ranges[0]!.count}`)
                .join(' '),
            );
      return result
        .filter((script) => script.functions.some((f) => f.ranges[0]!.count > 0))
        .map((script) => (script.url.startsWith('file:') ? fileURLToPath(script.url) : script.url))
        .filter((file) => file.startsWith(src))
        .map((file) => file.slice(src.length))
        .sort();
    } finally {
      await client.dispose();
    }
  }

  it(`crosses at most ${MOST_FILES} of the gateway's files`, async () => {
    await deliver('path-warm-up'); // first-use work (lazy compilation, caches) is not the path
    // Four deliveries, and the files all of them ran: a background job (the pending mobile-ID check every 2 s, a
    // purge, a metrics tick) firing during a window is not the path. On a loaded machine a window may last long enough
    // for a job to fire in two of them; the path runs in every one.
    let files = await deliver('path-counted-1');
    for (const n of [2, 3, 4]) {
      const more = await deliver(`path-counted-${n}`);
      files = files.filter((f) => more.includes(f));
    }
    console.log(`webhook → graphql-ws next: ${files.length} files\n${files.join('\n')}`);
    expect(files).toContain('server/webhooks/mobile-id.ts');
    expect(files).toContain('server/ws.ts');
    expect(files.length, files.join('\n')).toBeLessThanOrEqual(MOST_FILES);
  });
});
