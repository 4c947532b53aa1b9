// What one app's credentials can make the gateway store (docs/decisions/051), measured the way the review did:
// 500 notifications with a 60 KB unknown field on the app's own token, 20 distinct 1 MB bodies to its identification
// callback address, 100 identificationCallbackUrl queries of 15 aliases each. Prints one JSON object.
// Run: npx tsx bench/experiments/storage-bounds.ts (against any checkout: it uses only the test helper and public routes).
import fs from 'node:fs';
import path from 'node:path';
import { request } from 'undici';

import { startTestGateway, type TestGateway } from '../../test/helpers/gateway.js';

const KEY = 'storage-bench-key-0123456789';

function folderBytes(dir: string): number {
  let total = 0;
  for (const name of fs.readdirSync(dir)) {
    const file = path.join(dir, name);
    const stat = fs.statSync(file);
    total += stat.isDirectory() ? folderBytes(file) : stat.size;
  }
  return total;
}

async function storedChars(gw: TestGateway, kind: string): Promise<{ rows: number; chars: number }> {
  const rows = await gw.gateway.services.store.db
    .selectFrom('events')
    .select(['payload', 'meta'])
    .where('kind', '=', kind)
    .execute();
  return { rows: rows.length, chars: rows.reduce((n, r) => n + r.payload.length + r.meta.length, 0) };
}

async function post(url: string, body: string, token?: string): Promise<number> {
  const res = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body,
  });
  await res.body.text();
  return res.statusCode;
}

async function main(): Promise<void> {
  const gw = await startTestGateway({ GATEWAY_API_KEYS: `shop:${KEY}`, LOG_LEVEL: 'silent' });
  const out: Record<string, unknown> = {};
  try {
    // 1. 500 notifications with a 60 KB unknown field, on a token the app issued itself.
    const token = (await gw.graphql(`mutation { issueMobileIdNotificationToken { token } }`, {}, { key: KEY })).data!
      .issueMobileIdNotificationToken.token as string;
    const filler = 'u'.repeat(60_000);
    const folderBefore = folderBytes(gw.dataDir);
    const statuses: Record<number, number> = {};
    const t0 = performance.now();
    for (let i = 0; i < 500; i++) {
      const s = await post(
        `${gw.url}/webhooks/mobile-id`,
        JSON.stringify({
          auth_req_id: `bench-${i}`,
          error: 'access_denied',
          error_description: 'Client timeout',
          extension: filler,
        }),
        token,
      );
      statuses[s] = (statuses[s] ?? 0) + 1;
    }
    out.notifications = {
      statuses,
      seconds: +((performance.now() - t0) / 1000).toFixed(2),
      stored: await storedChars(gw, 'mobile-id'),
      dataFolderGrowthBytes: folderBytes(gw.dataDir) - folderBefore,
    };

    // 2. 20 distinct 1 MB bodies to the app's own identification callback address.
    const created = await gw.graphql(
      `mutation { createIdentification(input: { workflowId: "bench-wf" }) { identification { id callbackUrl } } }`,
      {},
      { key: KEY },
    );
    const link = created.data!.createIdentification.identification as { id: string; callbackUrl: string };
    const callbackStatuses: Record<number, number> = {};
    for (let i = 0; i < 20; i++) {
      const body = JSON.stringify({
        identificationId: link.id,
        status: 'DONE',
        n: i,
        blob: 'b'.repeat(1024 * 1024 - 200),
      });
      const s = await post(link.callbackUrl, body);
      callbackStatuses[s] = (callbackStatuses[s] ?? 0) + 1;
    }
    out.callbacks = { statuses: callbackStatuses, stored: await storedChars(gw, 'identification') };

    // 3. 100 identificationCallbackUrl queries of 15 aliases each (distinct workflows).
    const rowsBefore = Number(
      (
        await gw.gateway.services.store.db
          .selectFrom('identification_callbacks')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );
    for (let q = 0; q < 100; q++) {
      const fields = Array.from(
        { length: 15 },
        (_, a) => `a${a}: identificationCallbackUrl(workflowId: "wf-${q}-${a}")`,
      ).join(' ');
      const res = await gw.graphql(`{ ${fields} }`, {}, { key: KEY });
      if (res.errors) throw new Error(JSON.stringify(res.errors));
    }
    const rowsAfter = Number(
      (
        await gw.gateway.services.store.db
          .selectFrom('identification_callbacks')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );
    out.callbackAddressQueries = { queries: 100, aliasesEach: 15, rowsCreated: rowsAfter - rowsBefore };
  } finally {
    await gw.close();
  }
  console.log(JSON.stringify(out, null, 2));
}

await main();
