import { createHmac } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { IdentificationCallbacks } from '../../src/identity/identification-callbacks.js';
import { createLogger } from '../../src/logger.js';
import { openStore, type Store } from '../../src/store/index.js';

/**
 * The workflow id of an identification is the app's input, so the identification callback addresses a process
 * remembers having written must not grow with every workflow an app names over the life of the process.
 */
describe('identification callback addresses one process remembers', () => {
  let dir: string;
  let store: Store;
  const derive = (text: string) => createHmac('sha256', 'test-key').update(text).digest('hex');

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'callback-addresses-'));
    store = await openStore({ dataDir: dir, logger: createLogger({ level: 'silent' }) });
  });
  afterAll(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const rows = async () =>
    Number(
      (
        await store.db
          .selectFrom('identification_callbacks')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );

  it('stay within their bound however many workflows an app names, and a forgotten address still works', async () => {
    const bound = 8;
    const callbacks = new IdentificationCallbacks(store.db, derive, bound);
    const tokens: string[] = [];
    for (let i = 0; i < 30; i++) tokens.push(await callbacks.issue('app-a', `workflow-${i}`));

    expect(callbacks.remembered).toBe(bound);
    expect(await rows()).toBe(30);
    // The first address was forgotten by the process, not by the database: issued again it is the same address,
    // written once, and a callback to it is recognized.
    expect(await callbacks.issue('app-a', 'workflow-0')).toBe(tokens[0]);
    expect(await rows()).toBe(30);
    expect(await callbacks.find(tokens[0]!)).toEqual({ workflowId: 'workflow-0', createdBy: 'app-a' });
    expect(callbacks.remembered).toBe(bound);
  });
});
