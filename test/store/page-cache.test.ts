// SQLITE_CACHE_KIB sets the page cache of the gateway's SQLite connection (docs/decisions/118): 4,096 KiB unless set,
// a whole number of KiB from 256 to 1,048,576, and what the connection runs with.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';

import { loadConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/logger.js';
import { openStore, type Store } from '../../src/store/index.js';

describe('SQLITE_CACHE_KIB', () => {
  const opened: Array<{ store: Store; dir: string }> = [];
  afterEach(async () => {
    for (const { store, dir } of opened.splice(0)) {
      await store.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  async function cacheSizeOf(sqliteCacheKib: number | undefined): Promise<number> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'page-cache-'));
    const store = await openStore({ dataDir: dir, logger: createLogger({ level: 'silent' }), sqliteCacheKib });
    opened.push({ store, dir });
    const { rows } = await sql<{ cache_size: number }>`pragma cache_size`.execute(store.db);
    return Number(rows[0]!.cache_size);
  }

  it('is 4,096 KiB unless set, and refuses what is not a whole number of KiB from 256 to 1,048,576', () => {
    expect(loadConfig({}).sqliteCacheKib).toBe(4_096);
    expect(loadConfig({ SQLITE_CACHE_KIB: '16000' }).sqliteCacheKib).toBe(16_000);
    for (const bad of ['255', '1048577', '4096.5', '4MiB', '-4096'])
      expect(() => loadConfig({ SQLITE_CACHE_KIB: bad }), bad).toThrow(
        /SQLITE_CACHE_KIB: must be an integer from 256 to 1048576/,
      );
  });

  it('is the page cache the connection runs with (a negative cache_size is KiB)', async () => {
    expect(await cacheSizeOf(undefined)).toBe(-4_096);
    expect(await cacheSizeOf(16_000)).toBe(-16_000);
    expect(await cacheSizeOf(256)).toBe(-256);
  });

  it('refuses a cache that is not a whole number of KiB before it opens the database', async () => {
    const dir = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'page-cache-')), 'data');
    try {
      for (const bad of [0, -1, 1.5, Number.NaN])
        await expect(
          openStore({ dataDir: dir, logger: createLogger({ level: 'silent' }), sqliteCacheKib: bad }),
        ).rejects.toThrow(/a page cache of/);
      expect(fs.existsSync(dir)).toBe(false);
    } finally {
      fs.rmSync(path.dirname(dir), { recursive: true, force: true });
    }
  });
});
