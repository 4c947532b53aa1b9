// SQLite's file cannot be written (a disk full, a file-size limit, a read-only or failing volume): the same class as
// PostgreSQL away (docs/contract.md, SERVICE_UNAVAILABLE). A creation is answered as retryable on every transport,
// a webhook gets a 503 so that its sender retries, nothing raw reaches anyone, nothing is acknowledged that was not
// stored, and after the disk is back a retry with the same key creates exactly once. The fault is real: the
// process's file-size limit is set to 0, so every write of SQLite fails at the system call, whoever runs the test.
import { randomUUID } from 'node:crypto';
import { createClient as createSseClient } from 'graphql-sse';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { sqliteUnavailable } from '../../src/store/sqlite-dialect.js';
import { createProjectProbe, fileSizeLimitUnavailable, whileFilesCannotGrow } from '../helpers/faults.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { mcpClient, type TestMcpClient } from '../helpers/mcp.js';
import { postNotification, storedEvents, wsClient } from '../helpers/mobile-id.js';

const NAME = 'sqlite-unwritable';
const { post, first, expectEachCreatesOnce, made } = createProjectProbe(NAME);
const RAW = ['SQLITE', 'disk I/O', 'EFBIG', 'gateway.sqlite', 'INSERT', 'insert into'];

const unavailable = fileSizeLimitUnavailable();

describe.skipIf(unavailable !== null)(
  `SQLite's file cannot be written${unavailable ? ` (skipped: ${unavailable})` : ''}`,
  () => {
    let direct: TestGateway;
    let apollo: TestGateway;
    let mcp: TestMcpClient;

    beforeAll(async () => {
      direct = await startTestGateway({ MCP_MUTATIONS: 'all' });
      apollo = await startTestGateway({}, { testing: { directPath: false } });
      mcp = await mcpClient(direct);
    }, 60_000);
    afterAll(async () => {
      await mcp?.close();
      await direct?.close();
      await apollo?.close();
    });

    it('is SERVICE_UNAVAILABLE (503 with Retry-After over HTTP) on every transport and webhook; after the disk is back a retry with the same key creates once', async () => {
      const keys = {
        direct: randomUUID(),
        apollo: randomUUID(),
        ws: randomUUID(),
        sse: randomUUID(),
        mcp: randomUUID(),
      };
      const authReqId = `${NAME}-${randomUUID()}`;
      await whileFilesCannotGrow(async () => {
        for (const [name, gw] of [
          ['direct', direct],
          ['apollo', apollo],
        ] as const) {
          const res = await post(gw, keys[name]);
          expect(res.status, res.raw).toBe(503);
          expect(res.retryAfter).toBe('5');
          expect(res.body.errors[0].extensions).toEqual({ code: 'SERVICE_UNAVAILABLE', retryAfter: 5 });
          for (const raw of RAW) expect(res.raw).not.toContain(raw);
        }
        const ws = wsClient(direct);
        const sse = createSseClient({ url: `${direct.url}/graphql/stream`, singleConnection: false, retryAttempts: 0 });
        try {
          for (const [name, answer] of [
            ['ws', await first(ws, keys.ws)],
            ['sse', await first(sse, keys.sse)],
          ] as const) {
            expect(answer.errors[0]?.extensions, `${name}: ${answer.raw}`).toEqual({
              code: 'SERVICE_UNAVAILABLE',
              retryAfter: 5,
            });
            for (const raw of RAW) expect(answer.raw).not.toContain(raw);
          }
        } finally {
          await ws.dispose();
          sse.dispose();
        }
        const tool = await mcp.call('create_project', {
          input: { name: NAME, description: '' },
          idempotencyKey: keys.mcp,
        });
        expect(tool.isError).toBe(true);
        expect(tool.structuredContent?.errors).toEqual([
          expect.objectContaining({ code: 'SERVICE_UNAVAILABLE', retryAfterSeconds: 5 }),
        ]);
        for (const raw of RAW) expect(JSON.stringify(tool)).not.toContain(raw);
        // A webhook is not acknowledged: its sender retries on a 503.
        const hook = await postNotification(direct, {
          auth_req_id: authReqId,
          error: 'access_denied',
          error_description: 'the user declined',
        });
        expect(hook.status, hook.text).toBe(503);
        expect(hook.json).toMatchObject({ error: 'temporarily_unavailable' });
        expect(hook.headers['retry-after']).toBe('5');
        for (const raw of RAW) expect(hook.text).not.toContain(raw);
      });
      expect(direct.logs()).toMatch(/SQLITE_(IOERR|FULL)/);
      // Nothing was sent upstream, and nothing of the refused webhook was kept.
      expect(made(direct)).toHaveLength(0);
      expect(made(apollo)).toHaveLength(0);
      expect(await storedEvents(direct, authReqId)).toHaveLength(0);

      // The sender's retry is acknowledged and stored; each key creates once, and a second retry replays.
      const hook = await postNotification(direct, {
        auth_req_id: authReqId,
        error: 'access_denied',
        error_description: 'the user declined',
      });
      expect(hook.status, hook.text).toBe(204);
      expect(await storedEvents(direct, authReqId)).toHaveLength(1);
      await expectEachCreatesOnce([
        [direct, keys.direct],
        [apollo, keys.apollo],
        [direct, keys.ws],
        [direct, keys.sse],
      ]);
      const tool = await mcp.call('create_project', {
        input: { name: NAME, description: '' },
        idempotencyKey: keys.mcp,
      });
      expect(tool.isError, JSON.stringify(tool)).toBeFalsy();
      const replay = await mcp.call('create_project', {
        input: { name: NAME, description: '' },
        idempotencyKey: keys.mcp,
      });
      expect(replay.structuredContent).toMatchObject({ createProject: { replayed: true } });
      // The direct, graphql-ws, SSE and MCP keys reached the first gateway's sandbox, Apollo's the second's.
      expect(made(direct)).toHaveLength(4);
      expect(made(apollo)).toHaveLength(1);
    }, 60_000);
  },
);

describe("SQLite's answers that the database cannot be written or read now", () => {
  it.each(['SQLITE_FULL', 'SQLITE_READONLY', 'SQLITE_READONLY_DBMOVED', 'SQLITE_IOERR_WRITE', 'SQLITE_CANTOPEN'])(
    '%s is SERVICE_UNAVAILABLE',
    (code) => {
      const err = Object.assign(new Error('database or disk is full'), { code });
      expect(sqliteUnavailable(err)).toMatchObject({ extensions: { code: 'SERVICE_UNAVAILABLE', retryAfter: 5 } });
    },
  );
  it.each(['SQLITE_CONSTRAINT_UNIQUE', 'SQLITE_ERROR', 'SQLITE_BUSY'])('%s is not (the statement failed)', (code) => {
    const err = Object.assign(new Error('x'), { code });
    expect(sqliteUnavailable(err)).toBe(err);
  });
});
