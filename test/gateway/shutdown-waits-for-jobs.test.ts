// A shutdown that begins while a background job runs waits for that run before the store closes: the pass over
// pending mobile-ID notifications, held here inside its JWKS fetch, ends and stores what it verified, instead of
// failing on a closed store and leaving the notification it claimed to wait out its lease after the restart.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { exportJWK, generateKeyPair } from 'jose';
import { afterEach, describe, expect, it, vi } from 'vitest';

import { startJobs } from '../../src/gateway/jobs.js';
import { createLogger } from '../../src/logger.js';
import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import {
  OPERATOR_CLIENT_ID,
  OPERATOR_ISSUER,
  postNotification,
  signedNotification,
  storedEvents,
} from '../helpers/mobile-id.js';
import { waitFor } from '../helpers/wait.js';

const KEY = Buffer.alloc(32, 9).toString('base64');
const NOTIFY = 'operator-notification-token';
const PENDING_JOB = 'pending mobile-ID verification';

const opened: Array<{ close(): Promise<unknown> }> = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((o) => o.close()));
});

/**
 * The operator's JWKS: down (503) at first; once `hold` is called, the next request waits, unanswered, until the test
 * calls `release`, which answers it with the key.
 */
async function heldJwks() {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const body = JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: 'op-1', alg: 'ES256', use: 'sig' }] });
  let holding = false;
  let held: http.ServerResponse | null = null;
  const server = http.createServer((_req, res) => {
    if (!holding) return void res.writeHead(503).end();
    held = res;
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const jwks = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`,
    privateKey,
    hold: () => void (holding = true),
    arrived: () => held !== null,
    release: () => void held!.writeHead(200, { 'content-type': 'application/json' }).end(body),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
  opened.push(jwks);
  return jwks;
}

async function gateway(dataDir: string, jwksUrl: string, testing: Parameters<typeof startTestGateway>[1]) {
  return startTestGateway(
    {
      DATA_DIR: dataDir,
      TOKEN_ENCRYPTION_KEY: KEY,
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
      GATEWAY_API_KEYS: 'app-key-1',
      MOBILEID_NOTIFICATION_TOKENS: NOTIFY,
      MOBILEID_JWKS_URL: jwksUrl,
      MOBILEID_ISSUER: OPERATOR_ISSUER,
      MOBILEID_CLIENT_ID: OPERATOR_CLIENT_ID,
    },
    testing,
  );
}

const lines = (gw: TestGateway, text: string) =>
  gw
    .logs()
    .split('\n')
    .filter((l) => l.includes(text));

describe('shutdown during a background job', () => {
  it('waits for the run under way before the store closes, and the run ends cleanly', async () => {
    const jwks = await heldJwks();
    const clock = { now: Date.now() };
    const runs = new Map<string, () => void>();
    const dataDir = tempDataDir();
    const gw = await gateway(dataDir, jwks.url, {
      testing: {
        clock: () => clock.now,
        scheduleJob: (name, run) => {
          runs.set(name, run);
          return () => undefined;
        },
      },
    });
    let closing: Promise<void> | null = null;
    try {
      // Acknowledged while the JWKS is down: kept pending verification.
      const n = await signedNotification(jwks.privateKey, 'held-at-shutdown');
      expect((await postNotification(gw, n, { token: NOTIFY })).status).toBe(204);
      expect(await storedEvents(gw, 'held-at-shutdown')).toHaveLength(0);

      // The next pass claims it and waits on the JWKS, which the test holds.
      jwks.hold();
      clock.now += 10 * 60_000;
      runs.get(PENDING_JOB)!();
      await waitFor(() => jwks.arrived(), 20_000, 'the pass to fetch the JWKS');

      const store = gw.gateway.services.store;
      const storeClose = vi.spyOn(store, 'close');
      let closed = false;
      closing = gw.close().then(() => void (closed = true));
      // Either the shutdown says it waits for the run, or (the fault) it closes the store under it and ends.
      await waitFor(
        () => closed || lines(gw, 'shutdown waits for the background jobs under way').length > 0,
        20_000,
        'the shutdown to wait for the run or to end',
      );
      expect(closed).toBe(false);
      expect(storeClose).not.toHaveBeenCalled();

      jwks.release();
      await closing;
      expect(storeClose).toHaveBeenCalledTimes(1);
      expect(lines(gw, 'background job failed')).toEqual([]);
      expect(lines(gw, 'still running at the end of the drain')).toEqual([]);
      expect(lines(gw, `shutdown waits for the background jobs under way: ${PENDING_JOB}`)).toHaveLength(1);
      expect(lines(gw, 'pending mobile-ID notification verified and delivered')).toHaveLength(1);
    } finally {
      await (closing ?? gw.close());
    }

    // The run stored what it verified: the next start has the event, and no pass left for it.
    const again = await gateway(dataDir, jwks.url, { testing: { scheduleJob: () => () => undefined } });
    opened.push(again);
    expect(await storedEvents(again, 'held-at-shutdown')).toHaveLength(1);
  });

  it('waits no longer than the end of the drain, and names the run it leaves', async () => {
    const written: string[] = [];
    const destination = new Writable({
      write(chunk, _enc, cb) {
        written.push(chunk.toString());
        cb();
      },
    });
    const logger = createLogger({ level: 'info', destination });
    let start: (() => void) | undefined;
    let runs = 0;
    let stopped = 0;
    const stop = startJobs(
      [
        {
          name: 'never ends',
          intervalMs: 60_000,
          run: () => {
            runs += 1;
            return new Promise(() => undefined);
          },
          stop: async () => void stopped++,
        },
      ],
      logger,
      (_name, run) => {
        start = run;
        return () => undefined;
      },
    );
    start!();
    // The drain has ended already: the stop goes on at once, and the job's own stop still runs.
    await stop(Date.now() - 1);
    expect(stopped).toBe(1);
    expect(written.filter((l) => l.includes('still running at the end of the drain'))).toEqual([
      expect.stringContaining('the store closes under them: never ends'),
    ]);
    // What the schedule starts after the stop is not run.
    start!();
    expect(runs).toBe(1);
  });
});
