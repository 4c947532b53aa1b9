// A WebSocket subscriber closed as a slow consumer gets 1013 with a reason naming the subscription and its last cursor
// (docs/subscriptions.md). A close reason holds at most 123 bytes, and the graphql-ws client names each subscription
// by a UUID (36 characters): with its fixed words and a cursor, the reason passed that, and the cut fell in the
// cursor, so the one thing in it to resume from came out unusable. The id is cut now, never the cursor.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { VerificationSandbox } from '../../src/sandbox/verification.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { postCompletion, registerVerifications, resumeWs, slowWsConsumer } from '../helpers/resumable.js';
import { waitFor } from '../helpers/wait.js';

const KEY = 'key-a';

describe('the close reason of a slow WebSocket subscriber', () => {
  let t: TestGateway;
  let sandbox: VerificationSandbox;
  let urls: Map<string, string>;

  beforeAll(async () => {
    t = await startTestGateway({
      GATEWAY_API_KEYS: KEY,
      SANDBOX_CALLBACK_DELAY_MS: '600000',
      SUBSCRIBER_BUFFER_BYTES: '65536',
      CALLBACK_BODY_KEPT_BYTES: '262144',
    });
    sandbox = t.gateway.sandbox.verification!;
    urls = await registerVerifications(t, sandbox, KEY, 1);
  });
  afterAll(async () => {
    await t.close();
  });

  it('names the whole last cursor when the subscription id is a UUID, as the graphql-ws client makes it', async () => {
    const [id] = [...urls.keys()];
    // A verification per event: posted 20 times first, so that the cursors have the length of a log in use.
    for (let i = 0; i < 20; i++) await postCompletion(urls.get(id!)!, id!, `before-${i}`);
    const subscription = randomUUID();
    const { ns, cursors, posted, closed } = await slowWsConsumer(t, KEY, urls.get(id!)!, id!, subscription);
    expect(closed.code).toBe(1013);
    expect(Buffer.byteLength(closed.reason)).toBeLessThanOrEqual(123);
    const last = cursors[cursors.length - 1]!;
    // The cursor whole, at the reason's end: what the client resumes from.
    expect(closed.reason).toMatch(new RegExp(`^Try again later: slow consumer; resume \\S+ after ${last}$`));
    // The id as far as it fits, then the cut.
    expect(closed.reason).toContain(`resume ${subscription.slice(0, 8)}`);
    // And resuming from the cursor the reason names loses nothing.
    const named = /after (\S+)$/.exec(closed.reason)![1]!;
    const resumed = await resumeWs(t, KEY, named);
    await waitFor(() => ns.length + resumed.events.length === posted.length, 30_000, 'the rest after the cursor');
    expect([...ns, ...resumed.events.map((e) => e.n)]).toEqual(posted);
    await resumed.close();
  }, 120_000);
});
