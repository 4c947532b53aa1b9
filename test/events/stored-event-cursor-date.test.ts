// A one-key stream answered from the log (`verificationCompleted(externalId)` for a result that came days ago) hands
// out a cursor that covers everything the bus had delivered when the stream started. Its date is that start, on the
// gateway clock, not the old event's receipt: a resume from it is refused as expired only once EVENT_RETENTION has
// passed since the stream started, when events after it may really have been purged. Dated by the event, a 6-day-old
// result's cursor under a 7-day retention was refused two days later. Real server on port 0, SQLite on disk, real
// graphql-ws clients, the testing clock, the purge run by hand.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { VERIFICATION_EVENT_KIND } from '../../src/identity/service.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { testClock } from '../helpers/jwt.js';
import { collect, wsClient } from '../helpers/mobile-id.js';
import { postCompletion, registerVerifications, resumeWs, wildcardListeners } from '../helpers/resumable.js';
import { waitFor } from '../helpers/wait.js';

const KEY = 'key-stored-cursor-date-0123456789';
const DAY_MS = 86_400_000;

const ONE_KEY = `subscription($id: ID!) { verificationCompleted(externalId: $id) { externalId payload } }`;

describe("the cursor of a one-key stream's stored event", () => {
  const clock = testClock();
  const runs = new Map<string, () => void>();
  let t: TestGateway;
  let callback: { id: string; url: string };
  /** The stored event's cursor, handed out six days after the event arrived. */
  let cursor: string;

  const stored = async () =>
    Number(
      (
        await t.gateway.services.store.db
          .selectFrom('events')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('kind', '=', VERIFICATION_EVENT_KIND)
          .executeTakeFirstOrThrow()
      ).n,
    );

  /** A stream of every result of the app resumed from `cursor`: the events it gets, or its refusal. */
  async function resumed(post: string) {
    const sub = await resumeWs(t, KEY, cursor);
    try {
      await waitFor(
        () => sub.errors.length > 0 || wildcardListeners(t, VERIFICATION_EVENT_KIND) > 0,
        20_000,
        'the resumed stream listening, or its refusal',
      );
      if (sub.errors.length === 0) {
        await postCompletion(callback.url, callback.id, post);
        await waitFor(() => sub.events.length > 0 || sub.errors.length > 0, 20_000, 'the new result, or a refusal');
      }
    } finally {
      await sub.close();
      await waitFor(() => wildcardListeners(t, VERIFICATION_EVENT_KIND) === 0, 20_000, 'the resumed stream gone');
    }
    return sub;
  }

  beforeAll(async () => {
    t = await startTestGateway(
      { GATEWAY_API_KEYS: KEY, EVENT_RETENTION: '7d', SANDBOX_CALLBACK_DELAY_MS: '600000' },
      {
        testing: {
          clock: clock.now,
          scheduleJob: (name, run) => {
            runs.set(name, run);
            return () => undefined;
          },
        },
      },
    );
    const [id, url] = [...(await registerVerifications(t, t.gateway.sandbox.verification!, KEY, 1))][0]!;
    callback = { id, url };
    await postCompletion(url, id, 'old');

    // Six days later the app subscribes to that verification: its result comes from the log, with its cursor.
    clock.advance(6 * DAY_MS);
    const sub = collect(wsClient(t, { key: KEY }), ONE_KEY, { id });
    await waitFor(() => sub.results.length > 0 || sub.errors.length > 0, 20_000, 'the stored result');
    sub.stop();
    expect(sub.errors).toEqual([]);
    expect(sub.results.map((r) => r.data.verificationCompleted.payload.n)).toEqual(['old']);
    cursor = sub.results[0].extensions.cursor as string;
  }, 60_000);

  afterAll(() => t?.close());

  it('resumes two days later, after the retention purge deleted the event itself, with nothing missed', async () => {
    clock.advance(2 * DAY_MS);
    // Eight days after it arrived the event is past its retention: the purge deletes it. The cursor covers it.
    runs.get('purge expired events')!();
    await waitFor(async () => (await stored()) === 0, 20_000, 'the old event purged');

    const sub = await resumed('new');
    expect(sub.errors).toEqual([]);
    expect(sub.events.map((e) => e.n)).toEqual(['new']);
  });

  it('is refused as expired once EVENT_RETENTION has passed since the stream started', async () => {
    // Seven days and a minute after the stream that handed it out started.
    clock.advance(5 * DAY_MS + 60_000);
    const sub = await resumed('later');
    expect(sub.events).toEqual([]);
    expect(sub.errors[0]).toMatchObject({
      extensions: { code: 'BAD_USER_INPUT', field: 'after', reason: 'expired', retentionMs: 7 * DAY_MS },
    });
  });
});
