// The background jobs of startGateway (decision 063): one named list, scheduled in one place and stopped together at
// shutdown. The test schedules them itself (testing.scheduleJob) and moves the testing clock instead of waiting.
import { describe, expect, it } from 'vitest';

import { startTestGateway } from '../helpers/gateway.js';
import { postNotification, storedAccessToken, storedEvents } from '../helpers/mobile-id.js';
import { waitFor } from '../helpers/wait.js';

/** The gateway's key, so that the test can open what it stores. */
const KEY = Buffer.alloc(32, 7).toString('base64');

describe('background jobs', () => {
  it('are one named list on SQLite, each scheduled once and each cancelled at shutdown', async () => {
    const scheduled: string[] = [];
    const cancelled: string[] = [];
    const gw = await startTestGateway(
      {},
      {
        testing: {
          scheduleJob: (name) => {
            scheduled.push(name);
            return () => cancelled.push(name);
          },
        },
      },
    );
    expect(scheduled).toEqual([
      'app activity',
      'purge idempotency records',
      'purge expired events',
      'purge expired mobile-ID secrets',
      'purge rate-limit counters',
      'purge agent plans',
      'pending mobile-ID verification',
    ]);
    expect(cancelled).toEqual([]);
    await gw.close();
    expect(cancelled).toEqual(scheduled);
  });

  it('purges an expired mobile-ID access token when its job runs, judged by the testing clock', async () => {
    const clock = { now: Date.now() };
    const runs = new Map<string, () => void>();
    const gw = await startTestGateway(
      { TOKEN_ENCRYPTION_KEY: KEY },
      {
        testing: {
          clock: () => clock.now,
          scheduleJob: (name, run) => {
            runs.set(name, run);
            return () => undefined;
          },
        },
      },
    );
    try {
      const n = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId: 'job-purge', expiresIn: 1 });
      expect((await postNotification(gw, n.body)).status).toBe(204);
      const accessToken = async () => storedAccessToken(KEY, (await storedEvents(gw, 'job-purge'))[0]!);
      expect(await accessToken()).toBe(n.body.access_token);

      clock.now += 1_100;
      runs.get('purge expired mobile-ID secrets')!();
      await waitFor(
        async () => (await accessToken()) === null,
        20_000,
        'the purge job to remove the expired access token',
      );
    } finally {
      await gw.close();
    }
  });
});
