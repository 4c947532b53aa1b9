import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, type LogEvent } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { createLogger } from '../../src/logger.js';
import { openStore, throughKysely, type Database } from '../../src/store/index.js';
import { Ledger } from '../../src/store/ledger.js';
import { GroupCommitSqliteDialect } from '../../src/store/sqlite-dialect.js';

/**
 * A project's tree is read through the project's and the parent's own index entries, however many
 * resources other projects have: the SQLite planner, with no statistics of its own, used to walk every
 * resource of the kind instead (bench scenario 3).
 */
describe('ledger reads on a large SQLite store', () => {
  let dir: string;
  let database: SQLite.Database;
  let db: Kysely<Database>;
  const statements: Array<{ sql: string; parameters: readonly unknown[] }> = [];

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledger-plans-'));
    const store = await openStore({ dataDir: dir, logger: createLogger({ level: 'silent' }) });
    await store.close();
    database = new SQLite(path.join(dir, 'gateway.sqlite'));
    const insert = database.prepare(
      `insert into resources (id, kind, project_id, parent_id, title, spec, response, idempotency_key, created_by, created_at)
       values (?, ?, ?, ?, 't', '{}', '{}', null, 'test', ?)`,
    );
    database.transaction(() => {
      // Another project with 20,000 networks and 20,000 subnets; ours has 2 networks with 2 subnets each.
      for (let i = 0; i < 20_000; i++) {
        insert.run(`other-net-${i}`, 'network', 'other', null, i);
        insert.run(`other-subnet-${i}`, 'subnet', 'other', `other-net-${i % 500}`, i);
      }
      for (let n = 0; n < 2; n++) {
        insert.run(`net-${n}`, 'network', 'ours', null, n);
        for (let s = 0; s < 2; s++) insert.run(`subnet-${n}-${s}`, 'subnet', 'ours', `net-${n}`, s);
      }
    })();
    db = new Kysely<Database>({
      dialect: new GroupCommitSqliteDialect(database),
      log: (e: LogEvent) => {
        statements.push({ sql: e.query.sql, parameters: e.query.parameters });
      },
    });
  });

  afterAll(async () => {
    await db.destroy();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const plan = (s: { sql: string; parameters: readonly unknown[] }) =>
    (database.prepare(`explain query plan ${s.sql}`).all(...s.parameters) as Array<{ detail: string }>)
      .map((r) => r.detail)
      .join('; ');

  it("finds a project's networks through the project index", async () => {
    statements.length = 0;
    const [networks] = await new Ledger({ store: throughKysely(db) }).inProjects('network', ['ours']);
    expect(networks!.map((r) => r.id)).toEqual(['net-0', 'net-1']);
    expect(plan(statements[0]!)).toMatch(/USING INDEX resources_project \(project_id=\? AND kind=\?\)/);
  });

  it('finds the subnets of several networks through the parent index', async () => {
    statements.length = 0;
    const groups = await new Ledger({ store: throughKysely(db) }).childrenOf('subnet', ['net-0', 'net-1']);
    expect(groups.map((g) => g.map((r) => r.id))).toEqual([
      ['subnet-0-0', 'subnet-0-1'],
      ['subnet-1-0', 'subnet-1-1'],
    ]);
    expect(plan(statements[0]!)).toMatch(/USING INDEX resources_parent \(parent_id=\? AND kind=\?\)/);
  });

  it('reads a tree level with records kept in memory from the index alone, in its order, with no sort', async () => {
    const ledger = new Ledger({ store: throughKysely(db), cache: { size: 100, keeps: () => true } });
    statements.length = 0;
    const [networks] = await ledger.inProjects('network', ['ours']);
    expect(networks!.map((r) => r.id)).toEqual(['net-0', 'net-1']);
    expect(plan(statements[0]!)).toBe(
      'SEARCH resources USING COVERING INDEX resources_project (project_id=? AND kind=?)',
    );
    statements.length = 0;
    const groups = await ledger.childrenOf('subnet', ['net-1', 'net-0']);
    expect(groups.map((g) => g.map((r) => r.id))).toEqual([
      ['subnet-1-0', 'subnet-1-1'],
      ['subnet-0-0', 'subnet-0-1'],
    ]);
    expect(plan(statements[0]!)).toBe(
      'SEARCH resources USING COVERING INDEX resources_parent (parent_id=? AND kind=?)',
    );
    // The records not yet in memory, by their primary key.
    expect(plan(statements[1]!)).toMatch(/USING INDEX sqlite_autoindex_resources_1 \(id=\?\)/);
    statements.length = 0;
    await ledger.childrenOf('subnet', ['net-0', 'net-1']);
    expect(statements).toHaveLength(1);
  });
});
