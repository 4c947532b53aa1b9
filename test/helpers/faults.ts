// Faults the tests produce for real, outside the gateway's code: the operating system refuses what the gateway asks.
import { execFileSync } from 'node:child_process';
import { request } from 'undici';
import { expect } from 'vitest';

import type { TestGateway } from './gateway.js';

/**
 * Sets this process's soft file-size limit (RLIMIT_FSIZE, with `prlimit`): with 0, every write to a regular file
 * fails with EFBIG (Node ignores SIGXFSZ), so SQLite's next write fails at the system call (SQLITE_IOERR_WRITE)
 * whatever the user, root included, and reads go on. `null` lifts it. Pipes and sockets are not files: the test
 * runner's channel and the gateway's connections are untouched. Lowering a soft limit and raising it back up to the
 * hard one needs no privilege.
 */
export function fileSizeLimit(bytes: number | null): void {
  execFileSync('prlimit', ['--pid', String(process.pid), `--fsize=${bytes ?? 'unlimited'}:`]);
}

/** Why `fileSizeLimit` cannot work here, or null when it can (prlimit is util-linux's, on every Debian image). */
export function fileSizeLimitUnavailable(): string | null {
  try {
    execFileSync('prlimit', ['--pid', String(process.pid), '--fsize'], { stdio: 'pipe' });
    return null;
  } catch (err) {
    return `prlimit cannot set this process's file-size limit (${(err as Error).message.split('\n')[0]})`;
  }
}

/** Runs `work` while no file can be written, and lifts the limit after it, whatever happens. */
export async function whileFilesCannotGrow<T>(work: () => Promise<T>): Promise<T> {
  fileSizeLimit(0);
  try {
    return await work();
  } finally {
    fileSizeLimit(null);
  }
}

/** A `createProject` of the given name with its idempotency key in `$key`: the creation every fault test sends. */
export function createProjectProbe(name: string) {
  const query = `mutation($key: UUID) { createProject(input: { name: "${name}", description: "" }, idempotencyKey: $key) { project { id } replayed } }`;

  /** The creation over POST /graphql: status, Retry-After, the raw body and the parsed one. */
  async function post(gw: TestGateway, key: string) {
    const res = await request(`${gw.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query, variables: { key } }),
    });
    const raw = await res.body.text();
    return { status: res.statusCode, retryAfter: res.headers['retry-after'], raw, body: JSON.parse(raw) as any };
  }

  /** The first answer of a graphql-ws or graphql-sse client to the creation. */
  function first(
    client: { subscribe: (p: any, s: any) => () => void },
    key: string,
  ): Promise<{ raw: string; errors: any[] }> {
    return new Promise((resolve) => {
      client.subscribe(
        { query, variables: { key } },
        {
          next: (v: { errors?: any[] }) => resolve({ raw: JSON.stringify(v), errors: v.errors ?? [] }),
          error: (e: unknown) => resolve({ raw: JSON.stringify(e), errors: Array.isArray(e) ? e : [e] }),
          complete: () => undefined,
        },
      );
    });
  }

  /** After recovery: each key's retry creates (not a replay), and a second retry replays the same answer. */
  async function expectEachCreatesOnce(runs: ReadonlyArray<readonly [gw: TestGateway, key: string]>): Promise<void> {
    for (const [gw, key] of runs) {
      const created = await post(gw, key);
      expect(created.status, created.raw).toBe(200);
      expect(created.body.data.createProject.replayed).toBe(false);
      const again = await post(gw, key);
      expect(again.body.data.createProject).toEqual({ ...created.body.data.createProject, replayed: true });
    }
  }

  /** The projects of this name the gateway's cloud sandbox has made. */
  const made = (gw: TestGateway) => gw.gateway.sandbox.cloud!.projects().filter((p) => p.name === name);

  return { query, post, first, expectEachCreatesOnce, made };
}
