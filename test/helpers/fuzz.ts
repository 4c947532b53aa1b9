import fc from 'fast-check';
import { request } from 'undici';
import { afterAll, beforeAll, expect } from 'vitest';

import type { TestGateway } from './gateway.js';
import { storeSnapshot } from './store.js';

/**
 * Shared parts of the property tests: secrets with a recognisable shape (so that finding one in a
 * response or a log line is never a coincidence), header values an HTTP client can send, and the checks every
 * request must pass: never a 5xx, a refused request changes nothing, no secret anywhere.
 */

const HEX = fc.constantFrom(...'0123456789abcdef');
/** A secret value: `<prefix>-` and 24 hex digits. */
export const secretArb = (prefix: string) =>
  fc.string({ unit: HEX, minLength: 24, maxLength: 24 }).map((h) => `${prefix}-${h}`);
export const SECRET_RE = /\b(?:AT|IDT|PW|SEC)-[0-9a-f]{24}\b/g;

/** A header value undici accepts: visible Latin-1 and spaces, no CR/LF. */
export const headerValueArb = fc.string({
  unit: fc
    .integer({ min: 0x20, max: 0xff })
    .filter((c) => c !== 0x7f)
    .map((c) => String.fromCharCode(c)),
  maxLength: 300,
});

/** JSON of any shape, small. */
export const junkArb = fc.jsonValue({ maxDepth: 2 });

/** Records unhandled rejections of this process (the gateway runs in it) while a fuzz file runs. */
export function watchUnhandledRejections(): () => unknown[] {
  const seen: unknown[] = [];
  const listener = (reason: unknown) => seen.push(reason);
  beforeAll(() => {
    process.on('unhandledRejection', listener);
  });
  afterAll(() => {
    process.off('unhandledRejection', listener);
  });
  return () => seen;
}

export interface RawResponse {
  status: number;
  text: string;
}

export async function send(
  gw: TestGateway,
  method: string,
  path: string,
  headers: Record<string, string>,
  body: string | undefined,
): Promise<RawResponse> {
  const res = await request(`${gw.url}${path}`, { method: method as 'POST', headers, body });
  return { status: res.statusCode, text: await res.body.text() };
}

/**
 * Runs one request and checks the properties: no 5xx; when `refused(response)`, the store and event log are as they
 * were; none of `secrets` in the response or in any log line written meanwhile.
 */
export async function checkRequest(
  gw: TestGateway,
  run: () => Promise<RawResponse>,
  options: { secrets: readonly string[]; refused: (res: RawResponse) => boolean },
): Promise<RawResponse> {
  // Work an earlier case started in the background (a provisioning's later steps) ends before the snapshot.
  await gw.gateway.services.provisioning.idle();
  // Rows that expire within two minutes (a notification token issued with a 10 s lifetime by an earlier case) may be
  // purged by the gateway's maintenance at any moment: compared are the rows that outlive the case.
  const expiringBefore = Date.now() + 120_000;
  const before = await storeSnapshot(gw, { expiringBefore });
  const logStart = gw.logs().length;
  const res = await run();
  expect(res.status, res.text).toBeLessThan(500);
  if (options.refused(res)) {
    const after = await storeSnapshot(gw, { expiringBefore });
    // The tables that differ, named: a long row's difference does not show in a truncated diff.
    const changed = Object.keys(before).filter(
      (table) => JSON.stringify(before[table]) !== JSON.stringify(after[table]),
    );
    expect(changed, `refused (${res.status} ${res.text.slice(0, 300)}) yet these tables changed`).toEqual([]);
  }
  const logs = gw.logs().slice(logStart);
  for (const secret of options.secrets) {
    if (secret.length < 8) continue;
    expect(res.text.includes(secret), `secret ${secret} in the response: ${res.text.slice(0, 300)}`).toBe(false);
    expect(logs.includes(secret), `secret ${secret} in the logs`).toBe(false);
  }
  return res;
}
