import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { createLogger } from '../../src/logger.js';
import { openStore, throughKysely, type Store } from '../../src/store/index.js';
import { Ledger, type LedgerRecord } from '../../src/store/ledger.js';

/**
 * The ledger's read statements are compiled once per shape and run again with new parameters (docs/decisions/027), and
 * answer the same through kysely's row objects, through the store's arrays of values (SQLite's raw mode), and with the
 * records kept in memory once read (docs/decisions/070; a cache smaller than the tree, so that records leave it too).
 */
describe.each([
  ['row objects through kysely', (store: Store) => new Ledger({ store: throughKysely(store.db) })],
  ['arrays of values from the store', (store: Store) => new Ledger({ store })],
  ['records kept in memory', (store: Store) => new Ledger({ store, cache: { size: 5, keeps: () => true } })],
])('ledger reads (%s)', (_via, makeLedger) => {
  let dir: string;
  let store: Store;
  let ledger: Ledger;
  const at = (i: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, i));
  const rec = (id: string, kind: LedgerRecord['kind'], projectId: string | null, parentId: string | null, i: number) =>
    ledger.record({
      id,
      kind,
      projectId,
      parentId,
      title: id,
      spec: { title: id, n: i },
      response: { id, i },
      idempotencyKey: null,
      createdBy: 'test',
      createdAt: at(i),
    });

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledger-reads-'));
    store = await openStore({ dataDir: dir, logger: createLogger({ level: 'silent' }) });
    ledger = makeLedger(store);
    for (const p of ['p1', 'p2']) {
      await rec(p, 'project', p, null, 0);
      for (let n = 1; n <= 3; n++) {
        await rec(`${p}-net${n}`, 'network', p, null, n);
        for (let s = 1; s <= 2; s++) await rec(`${p}-net${n}-sub${s}`, 'subnet', p, `${p}-net${n}`, 10 * n + s);
      }
    }
  });
  afterAll(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('answers a second read of the same shape with its own parameters, not the first call’s', async () => {
    expect((await ledger.getMany(['p1-net1', 'nope'])).map((r) => r?.id ?? null)).toEqual(['p1-net1', null]);
    expect((await ledger.getMany(['p2-net2', 'p1'])).map((r) => r?.id ?? null)).toEqual(['p2-net2', 'p1']);
    expect((await ledger.childrenOf('subnet', ['p1-net1'])).map((g) => g.map((r) => r.id))).toEqual([
      ['p1-net1-sub1', 'p1-net1-sub2'],
    ]);
    expect((await ledger.childrenOf('subnet', ['p2-net3'])).map((g) => g.map((r) => r.id))).toEqual([
      ['p2-net3-sub1', 'p2-net3-sub2'],
    ]);
    expect((await ledger.childrenOf('network', ['p2-net3'])).map((g) => g.map((r) => r.id))).toEqual([[]]);
    expect((await ledger.inProjects('network', ['p1', 'p2'])).map((g) => g.map((r) => r.id))).toEqual([
      ['p1-net1', 'p1-net2', 'p1-net3'],
      ['p2-net1', 'p2-net2', 'p2-net3'],
    ]);
    expect((await ledger.inProjects('subnet', ['p2', 'p1'])).map((g) => g.length)).toEqual([6, 6]);
    expect((await ledger.list('network', { limit: 2 })).map((r) => r.id)).toEqual(['p2-net3', 'p1-net3']);
    expect((await ledger.list('network', { limit: 3, offset: 2 })).map((r) => r.id)).toEqual([
      'p2-net2',
      'p1-net2',
      'p2-net1',
    ]);
    expect((await ledger.list('project')).map((r) => r.id)).toEqual(['p2', 'p1']);
  });

  it('answers the same when every read is repeated, and sees a resource recorded after a first read', async () => {
    for (let round = 0; round < 2; round++) {
      expect((await ledger.getMany(['p1-net1', 'nope', 'p1'])).map((r) => r?.id ?? null)).toEqual([
        'p1-net1',
        null,
        'p1',
      ]);
      expect((await ledger.childrenOf('subnet', ['p2-net1', 'p1-net2'])).map((g) => g.map((r) => r.id))).toEqual([
        ['p2-net1-sub1', 'p2-net1-sub2'],
        ['p1-net2-sub1', 'p1-net2-sub2'],
      ]);
    }
    const [before] = await ledger.inProjects('network', ['p3']);
    expect(before).toEqual([]);
    await rec('p3', 'project', 'p3', null, 0);
    await rec('p3-net1', 'network', 'p3', null, 2);
    expect((await ledger.inProjects('network', ['p3']))[0]!.map((r) => r.id)).toEqual(['p3-net1']);
    await rec('p3-net0', 'network', 'p3', null, 1);
    expect((await ledger.inProjects('network', ['p3']))[0]!.map((r) => r.id)).toEqual(['p3-net0', 'p3-net1']);
    expect((await ledger.get('p3-net0'))!.spec).toEqual({ title: 'p3-net0', n: 1 });
  });

  it('gives back the stored spec and response, with every other field', async () => {
    const r = (await ledger.get('p1-net2-sub1'))!;
    expect(r).toMatchObject({
      id: 'p1-net2-sub1',
      kind: 'subnet',
      projectId: 'p1',
      parentId: 'p1-net2',
      title: 'p1-net2-sub1',
      idempotencyKey: null,
      createdBy: 'test',
      createdAt: at(21),
    });
    expect(r.spec).toEqual({ title: 'p1-net2-sub1', n: 21 });
    expect(r.response).toEqual({ id: 'p1-net2-sub1', i: 21 });
    expect(r.spec).toBe(r.spec);
    expect(JSON.parse(JSON.stringify(r))).toMatchObject({
      spec: { n: 21 },
      response: { i: 21 },
      createdAt: at(21).toISOString(),
    });
  });
});
