// A cursor is not bound to the stream that handed it out: the one a one-key stream gives its stored event (the event
// had arrived before the subscription) resumes a stream over every key of the app as well, over GraphQL and MCP's
// wait_for_events. So it must claim only what had been delivered, not every number below the stored event: on
// PostgreSQL an event of another key can hold a lower number and commit later, and a resume from a cursor claiming
// that number would skip it for good (docs/decisions/061). Real gateway on one embedded PostgreSQL; the lower number
// is held uncommitted by a trigger that waits on a lock the test holds, so "commits later" is a fact of the test.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { VERIFICATION_EVENT_KIND } from '../../src/identity/service.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { mcpClient } from '../helpers/mcp.js';
import { collect, wsClient } from '../helpers/mobile-id.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { postCompletion, registerVerifications, resumeWs, wildcardListeners } from '../helpers/resumable.js';
import { waitFor } from '../helpers/wait.js';

const KEY = 'keyed-cursor-key';
/** The advisory lock the trigger waits on while the test holds it. */
const LOCK = 61_061;

const ONE_KEY = /* GraphQL */ `
  subscription ($id: ID) {
    verificationCompleted(externalId: $id) {
      externalId
      payload
    }
  }
`;

let pg: TestPostgres;
let t: TestGateway;
beforeAll(async () => {
  pg = await startPostgres();
  t = await startTestGateway({
    DATABASE_URL: await pg.createDatabase('keyed_cursor'),
    GATEWAY_API_KEYS: KEY,
    SANDBOX_CALLBACK_DELAY_MS: '600000',
  });
}, 120_000);
afterAll(async () => {
  await t?.close();
  await pg?.stop();
});

describe("a one-key stream's stored event, resumed on a stream of every key (PostgreSQL)", () => {
  it("carries a cursor that does not cover another key's lower number that commits later: the resumed stream and wait_for_events get that event", async () => {
    const urls = await registerVerifications(t, t.gateway.sandbox.verification!, KEY, 2);
    const [first, second] = [...urls.keys()] as [string, string];
    const [firstUrl, secondUrl] = [urls.get(first)!, urls.get(second)!];
    const db = t.gateway.services.store.db;
    // An insert of the second verification's event takes its number, then waits at this trigger while the lock is held.
    await sql
      .raw(
        `create function hold_second() returns trigger language plpgsql as $$
         begin
           if new.key = '${second.replace(/'/g, "''")}' then perform pg_advisory_xact_lock_shared(${LOCK}); end if;
           return new;
         end $$;
         create trigger hold_second before insert on events for each row execute function hold_second();`,
      )
      .execute(db);
    let release!: () => void;
    const releasing = new Promise<void>((resolve) => (release = resolve));
    let locked = false;
    const holder = db.connection().execute(async (conn) => {
      await sql`select pg_advisory_lock(${LOCK})`.execute(conn);
      locked = true;
      await releasing;
      await sql`select pg_advisory_unlock(${LOCK})`.execute(conn);
    });
    try {
      await waitFor(() => locked, 20_000, 'the lock');
      const lateAcknowledged = postCompletion(secondUrl, second, 'late');
      await waitFor(
        async () => {
          const { rows } = await sql<{ n: number }>`
            select count(*)::int as n from pg_locks
            where locktype = 'advisory' and objsubid = 1 and objid = ${LOCK} and not granted`.execute(db);
          return rows[0]!.n === 1;
        },
        20_000,
        "the second verification's insert, waiting with its number taken",
      );
      // Acknowledged (committed) with a higher number, while the lower one is still held.
      await postCompletion(firstUrl, first, 'stored');

      // The first verification's stream, subscribed after its event arrived: the stored event, with its cursor.
      const client = wsClient(t, { key: KEY });
      const keyed = collect(client, ONE_KEY, { id: first });
      await waitFor(() => keyed.results.length === 1, 20_000, 'the stored event');
      expect(keyed.results[0].data.verificationCompleted.payload.n).toBe('stored');
      const cursor = keyed.results[0].extensions.cursor as string;
      await client.dispose();

      // The lower number commits now, and is delivered.
      release();
      await lateAcknowledged;
      // The newest number of a verification's events (the second has one, the late one).
      const seqOf = async (id: string) =>
        Number(
          (
            await db
              .selectFrom('events')
              .select('seq')
              .where('kind', '=', VERIFICATION_EVENT_KIND)
              .where('key', '=', id)
              .orderBy('seq', 'desc')
              .executeTakeFirstOrThrow()
          ).seq,
        );
      const lateSeq = await seqOf(second);
      expect(lateSeq).toBeLessThan(await seqOf(first));
      await waitFor(() => t.gateway.services.events.bus.position().has(lateSeq), 20_000, 'the late event delivered');

      // Every result of the app after that cursor: the late one, then a live one, each once.
      const resumed = await resumeWs(t, KEY, cursor);
      await waitFor(() => wildcardListeners(t, VERIFICATION_EVENT_KIND) === 1, 20_000, 'the resumed stream listening');
      await postCompletion(firstUrl, first, 'next');
      await waitFor(() => resumed.events.some((e) => e.n === 'next'), 20_000, 'the live event');
      await resumed.close();
      expect(resumed.errors).toEqual([]);
      expect(resumed.events.map((e) => e.n)).toEqual(['late', 'next']);

      // MCP's wait_for_events reads the same log from the same cursor.
      const mcp = await mcpClient(t, { key: KEY });
      try {
        const page = await mcp.call('wait_for_events', { cursor, kinds: ['verification'], timeoutSeconds: 0 });
        expect(page.isError).toBeFalsy();
        expect((page.structuredContent!.events as { key: string }[]).map((e) => e.key)).toEqual([second, first]);
      } finally {
        await mcp.close();
      }
    } finally {
      release();
      await holder;
      await sql.raw('drop trigger hold_second on events; drop function hold_second()').execute(db);
    }
  });
});
