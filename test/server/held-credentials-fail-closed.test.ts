// What a credential holds open is authenticated again after a reload (src/server/held-credentials.ts). A check that
// throws instead of answering fails closed, as an `unavailable` answer does: what the credential held ends, and the
// failure is logged. No configuration makes the gateway's authenticator throw today, so a throwing one stands in for it.
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';

import { APP_GRANTS, type Caller } from '../../src/auth/caller.js';
import type { AuthFailure, AuthResult } from '../../src/auth/keys.js';
import { createLogger } from '../../src/logger.js';
import { Delivery, HeldCredentials, type Holding } from '../../src/server/held-credentials.js';

const CALLER: Caller = Object.freeze({ scope: 'app:shop', app: 'shop', grants: APP_GRANTS, via: 'API_KEYS' });

function fixture(authenticate: () => AuthResult | Promise<AuthResult>) {
  const lines: Array<{ level: number; msg: string }> = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  let generation = 1;
  const held = new HeldCredentials({
    authenticate,
    generation: () => generation,
    logger: createLogger({ destination }),
  });
  const refusals: AuthFailure[] = [];
  const admitted: Caller[] = [];
  const holding: Holding = {
    delivery: new Delivery(),
    authorization: 'Bearer shop-key',
    caller: CALLER,
    refused: (failure) => refusals.push(failure),
    admitted: (caller) => admitted.push(caller),
  };
  held.hold(holding, generation);
  return { held, holding, refusals, admitted, lines, reload: () => (generation += 1) };
}

describe('a held credential whose check throws after a reload', () => {
  it('ends what it held as unavailable and logs the failure, where it was kept under the old configuration', async () => {
    const f = fixture(() => {
      throw new Error('the key store is gone');
    });
    f.reload();
    expect(await f.held.recheck(f.holding)).toBeNull();
    expect(f.refusals).toEqual([expect.objectContaining({ ok: false, reason: 'unavailable' })]);
    expect(f.admitted).toEqual([]);
    // No longer held: a second reload does not reach it.
    expect(f.held.release(f.holding)).toBe(false);
    expect(f.lines.some((l) => l.level === 50 && /could not be authenticated again/.test(l.msg))).toBe(true);
  });

  it('a rejected promise is the same', async () => {
    const f = fixture(() => Promise.reject(new Error('the identity provider client failed')));
    f.reload();
    f.held.recheckAll();
    await expect.poll(() => f.refusals.length, { timeout: 20_000 }).toBe(1);
    expect(f.refusals[0]!.reason).toBe('unavailable');
  });

  it('an answer is still taken as it is: admitted under the new configuration', async () => {
    const f = fixture(() => ({ ok: true, caller: CALLER }));
    f.reload();
    expect(await f.held.recheck(f.holding)).toBe(CALLER);
    expect(f.refusals).toEqual([]);
    expect(f.held.stale(f.holding)).toBe(false);
  });
});
