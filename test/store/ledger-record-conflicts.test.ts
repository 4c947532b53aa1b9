import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { createLogger } from '../../src/logger.js';
import { openStore, throughKysely, type Statements, type Store } from '../../src/store/index.js';
import { Ledger, type LedgerRecord } from '../../src/store/ledger.js';

/**
 * The ledger's insert, written together with other statements (as the completion of an idempotency key writes it):
 * the same id under the same key (a replay after a crash) changes its row to itself and the unit is written, the first
 * record kept; the same id under another key changes no row, and nothing of the unit is written.
 */
describe.each([
  ['the store (SQLite group commit)', (store: Store): Statements => store],
  ['a kysely transaction', (store: Store): Statements => throughKysely(store.db)],
])('a ledger record written together through %s', (_via, statementsOf) => {
  let dir: string;
  let store: Store;
  let statements: Statements;
  let ledger: Ledger;
  const rec = (id: string, idempotencyKey: string | null, title = id): LedgerRecord => ({
    id,
    kind: 'network',
    projectId: 'p',
    parentId: null,
    title,
    spec: { title },
    response: { id },
    idempotencyKey,
    createdBy: 'test',
    createdAt: new Date(Date.UTC(2026, 0, 1)),
  });
  const together = (first: LedgerRecord, then: LedgerRecord) =>
    statements.writeTogether(ledger.recordWrite(first), [ledger.recordWrite(then)]);

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledger-conflicts-'));
    store = await openStore({ dataDir: dir, logger: createLogger({ level: 'silent' }) });
    statements = statementsOf(store);
    ledger = new Ledger({ store: statements });
  });
  afterAll(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('writes a replay under the same key, keeping the first record, and refuses the id under another key', async () => {
    expect(await together(rec('x1', 'kx1'), rec('a', 'k1', 'first'))).toBe(true);
    expect(await together(rec('x2', 'kx2'), rec('a', 'k1', 'replayed'))).toBe(true);
    expect((await ledger.get('a'))?.title).toBe('first');
    expect(await ledger.get('x2')).not.toBeNull();

    expect(await together(rec('x3', 'kx3'), rec('a', 'k2', 'another'))).toEqual({ unapplied: 0 });
    expect(await ledger.get('x3')).toBeNull();
    expect(await ledger.get('a')).toMatchObject({ title: 'first', idempotencyKey: 'k1' });

    // `record` alone still keeps the first, whichever key.
    await ledger.record(rec('a', 'k3', 'recorded'));
    expect((await ledger.get('a'))?.title).toBe('first');
  });
});
