import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ownerCaller, type Caller } from '../../src/auth/caller.js';
import { CursorError, Position } from '../../src/events/cursor.js';
import type { EventRecord } from '../../src/events/log.js';
import type { TestGateway } from '../helpers/gateway.js';
import { startReplicas, type Replicas } from '../helpers/postgres.js';
import {
  cursorNow,
  deliveredEverywhere,
  postCompletion,
  registerVerifications,
  resumeWs,
  type Resumed,
} from '../helpers/resumable.js';
import { waitFor } from '../helpers/wait.js';

const KEY_A = 'key-a';
const KEY_B = 'key-b';

describe('streams and event reads that resume on any replica (two gateways on one PostgreSQL)', () => {
  let r: Replicas;
  /** key-a's verifications (callback addresses on A) and key-b's one. */
  let mine: Map<string, string>;
  let theirs: Map<string, string>;
  let appA: Caller;
  let appB: Caller;
  /** A callback address on replica `at`: the path is the same on every replica. */
  const on = (at: TestGateway, url: string) => url.replace(r.a.url, at.url);

  beforeAll(async () => {
    r = await startReplicas('resume', { GATEWAY_API_KEYS: `${KEY_A},${KEY_B}`, SANDBOX_CALLBACK_DELAY_MS: '600000' });
    mine = await registerVerifications(r.a, r.a.gateway.sandbox.verification!, KEY_A, 2);
    theirs = await registerVerifications(r.a, r.a.gateway.sandbox.verification!, KEY_B, 1);
    // The owner scopes of the two apps, as their events carry them.
    const [id] = [...mine.keys()];
    const [other] = [...theirs.keys()];
    await postCompletion(mine.get(id!)!, id!, 'scope-probe');
    await postCompletion(theirs.get(other!)!, other!, 'scope-probe');
    const db = r.a.gateway.services.store.db;
    const scopeOf = async (key: string) =>
      (await db.selectFrom('events').select('scope').where('key', '=', key).executeTakeFirstOrThrow()).scope!;
    appA = ownerCaller(await scopeOf(id!));
    appB = ownerCaller(await scopeOf(other!));
  }, 120_000);
  afterAll(async () => {
    await r?.close();
  });

  it('a wildcard subscriber that leaves replica A resumes on replica B with its cursor: what was posted meanwhile, in order and once, then live', async () => {
    const [id] = [...mine.keys()];
    const url = mine.get(id!)!;
    // Earlier events (the set-up's) delivered everywhere first, so that the first one after the cursor is x1.
    await deliveredEverywhere(r.a, r.b);
    const first = await resumeWs(r.a, KEY_A, cursorNow(r.a, r.b));
    await postCompletion(on(r.a, url), id!, 'x1');
    await waitFor(() => first.events.length === 1, 20_000, 'x1 on A');
    await first.close();
    await postCompletion(on(r.a, url), id!, 'x2');
    await postCompletion(on(r.b, url), id!, 'x3');
    const again = await resumeWs(r.b, KEY_A, first.events[0]!.cursor);
    await waitFor(() => again.events.length === 2, 20_000, 'x2 and x3 on B');
    await postCompletion(on(r.a, url), id!, 'x4');
    await waitFor(() => again.events.length === 3, 20_000, 'x4 live on B');
    expect(again.events.map((e) => e.n)).toEqual(['x2', 'x3', 'x4']);
    await again.close();
  });

  it('random disconnects and reconnects, on either replica, with events posted at either, deliver every event once and in order (fast-check property)', async () => {
    const [id] = [...mine.keys()];
    const url = mine.get(id!)!;
    let cases = 0;
    const replica = fc.boolean().map((b) => (b ? 'a' : 'b') as 'a' | 'b');
    const op = fc.oneof(
      fc.record({ post: fc.integer({ min: 1, max: 3 }), at: replica }),
      fc.record({ toggle: fc.constant(true), at: replica }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 3, maxLength: 10 }), async (ops) => {
        cases += 1;
        const posted: string[] = [];
        const got: { n: string; cursor: string }[] = [];
        // The previous case's events delivered everywhere first: this case's cursor is past all of them.
        await deliveredEverywhere(r.a, r.b);
        let cursor = cursorNow(r.a, r.b);
        let sub: Resumed | null = null;
        for (const o of ops) {
          if ('post' in o) {
            for (let k = 0; k < o.post; k++) {
              const name = `q${cases}-${posted.length}`;
              posted.push(name);
              await postCompletion(on(r[o.at], url), id!, name);
            }
          } else if (sub === null) {
            sub = await resumeWs(r[o.at], KEY_A, cursor);
          } else {
            await sub.close();
            got.push(...sub.events);
            if (sub.events.length) cursor = sub.events[sub.events.length - 1]!.cursor;
            sub = null;
          }
        }
        sub ??= await resumeWs(r.b, KEY_A, cursor);
        const last = sub;
        await waitFor(() => got.length + last.events.length >= posted.length, 30_000, `case ${cases}: every event`);
        await last.close();
        got.push(...last.events);
        expect(got.map((e) => e.n)).toEqual(posted);
      }),
      { numRuns: 25, seed: 35_4 },
    );
    console.log(`resumable streams property (two replicas on PostgreSQL): ${cases} cases`);
    expect(cases).toBe(25);
  }, 600_000);

  it('waitForEvents on B waits on the bus for an event posted at A, and eventsAfter on A resumes from the cursor B returned', async () => {
    const [, id] = [...mine.keys()];
    const url = mine.get(id!)!;
    const readerA = r.a.gateway.services.events.reader;
    const readerB = r.b.gateway.services.events.reader;
    // "Now" on B is what B has delivered: the earlier tests' events must have reached it first, or the first of them
    // still on its way would come after this cursor (and end the wait) rather than the one posted below.
    await deliveredEverywhere(r.a, r.b);
    const start = (await readerB.eventsAfter(appA, null, ['verification'])).cursor;
    // Nothing after the cursor yet: the wait starts, and ends when the event arrives.
    const waiting = readerB.waitForEvents(appA, { cursor: start, kinds: ['verification'], timeoutSeconds: 60 });
    let settled = false;
    void waiting.then(() => (settled = true));
    await postCompletion(on(r.a, url), id!, 'w1');
    const page = await waiting;
    expect(settled).toBe(true);
    expect(page.timedOut).toBe(false);
    expect(page.events.map((e) => e.key)).toEqual([id]);
    // The page's cursor is the position just after its last event (handed out now rather than at the event's time).
    expect(r.a.gateway.services.events.cursors.decode(page.cursor, Infinity).position).toEqual(
      r.a.gateway.services.events.cursors.decode(page.events[0]!.cursor!, Infinity).position,
    );

    await postCompletion(on(r.b, url), id!, 'w2');
    await postCompletion(on(r.b, url), id!, 'w3');
    // On A, from B's cursor: returns at once once A has them, else waits for them.
    const seen: EventRecord[] = [];
    let cursor = page.cursor;
    while (seen.length < 2) {
      const next = await readerA.waitForEvents(appA, { cursor, kinds: ['verification'], timeoutSeconds: 30 });
      seen.push(...next.events);
      cursor = next.cursor;
    }
    expect(seen.map((e) => e.seq)).toEqual([...seen.map((e) => e.seq)].sort((x, y) => x - y));
    expect(seen).toHaveLength(2);
    // Nothing more after it, and a zero timeout returns at once.
    const none = await readerA.waitForEvents(appA, { cursor, kinds: ['verification'], timeoutSeconds: 0 });
    expect(none).toMatchObject({ events: [], timedOut: true });
    // limit pages: two events from the first cursor come one per call, each call's cursor leading to the next.
    const one = await readerA.eventsAfter(appA, page.cursor, ['verification'], 1);
    expect(one.events.map((e) => e.seq)).toEqual([seen[0]!.seq]);
    const two = await readerA.eventsAfter(appA, one.cursor, ['verification'], 1);
    expect(two.events.map((e) => e.seq)).toEqual([seen[1]!.seq]);
  }, 120_000);

  it('an app never reads nor waits on another app’s events, and an expired cursor is an explicit error', async () => {
    const [id] = [...mine.keys()];
    const [other] = [...theirs.keys()];
    const readerB = r.b.gateway.services.events.reader;
    const from = (await readerB.eventsAfter(appB, null, ['verification'])).cursor;
    await postCompletion(on(r.a, mine.get(id!)!), id!, 'not-for-b');
    await postCompletion(on(r.a, theirs.get(other!)!), other!, 'for-b');
    // key-b's wait ends with its own event only, though key-a's came first.
    const page = await readerB.waitForEvents(appB, { cursor: from, kinds: ['verification'], timeoutSeconds: 60 });
    expect(page.events.map((e) => e.key)).toEqual([other]);
    expect(
      (
        await readerB.eventsAfter(appB, from, ['verification', 'mobile-id', 'identification', 'provisioning'], 100)
      ).events.every((e) => e.scope === appB.scope),
    ).toBe(true);
    const expired = r.b.gateway.services.events.cursors.encode(new Position(1), Date.now() - 8 * 86_400_000);
    await expect(readerB.eventsAfter(appA, expired, ['verification'])).rejects.toBeInstanceOf(CursorError);
    await expect(
      readerB.waitForEvents(appA, { cursor: expired, kinds: ['verification'], timeoutSeconds: 1 }),
    ).rejects.toThrow(/older than the event retention \(EVENT_RETENTION, 7 days\)/);
  }, 120_000);

  it('onResourceChanged tells the owner on the other replica that its verification changed, and never another app', async () => {
    const [id] = [...mine.keys()];
    const [other] = [...theirs.keys()];
    const readerB = r.b.gateway.services.events.reader;
    const toOwner: string[] = [];
    const toOther: string[] = [];
    const ownOfOther: string[] = [];
    const offs = [
      readerB.onResourceChanged(appA, 'verification', id!, (e) => toOwner.push(e.key)),
      readerB.onResourceChanged(appB, 'verification', id!, (e) => toOther.push(e.key)),
      readerB.onResourceChanged(appB, 'verification', other!, (e) => ownOfOther.push(e.key)),
    ];
    try {
      await postCompletion(on(r.a, mine.get(id!)!), id!, 'changed-1');
      await postCompletion(on(r.a, theirs.get(other!)!), other!, 'changed-2');
      // B delivers in sequence order: once key-b heard of its own later change, the first one has been delivered too.
      await waitFor(() => ownOfOther.length === 1, 20_000, 'key-b hears of its own verification');
      expect(toOwner).toEqual([id]);
      expect(toOther).toEqual([]);
    } finally {
      for (const off of offs) off();
    }
  }, 120_000);
});
