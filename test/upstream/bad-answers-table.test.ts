// An audit, pinned as a table: bad answers of an upstream stand-in over loopback, and what the app sees for each on the
// cloud API (createProject) and an identity endpoint (createIdentification), asked twice with the same key. Every row
// held when it was written: a specific UPSTREAM_* code (never INTERNAL_SERVER_ERROR), no driver's sentence or address
// in the answer, nothing recorded from an answer whose id could not be read, and the gateway answering after them all.
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { M } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

/** What the stand-in writes for one request: raw pieces of HTTP/1.1, each in its own packet; then it closes. */
type Reply = Array<Buffer | string>;

function answer(status: number, body: Buffer | string, headers: Record<string, string> = {}): Reply {
  const b = typeof body === 'string' ? Buffer.from(body) : body;
  const all = { 'content-type': 'application/json', 'content-length': String(b.length), ...headers };
  const lines = Object.entries(all).map(([k, v]) => `${k}: ${v}\r\n`);
  return [`HTTP/1.1 ${status} X\r\n${lines.join('')}\r\n`, b];
}

let reply: Reply = [];
let received = 0;
let server: net.Server;
let url = '';

beforeAll(async () => {
  server = net.createServer((socket) => {
    socket.on('error', () => {});
    let buffered = '';
    socket.on('data', async (chunk) => {
      buffered += chunk.toString('latin1');
      const at = buffered.indexOf('\r\n\r\n');
      if (at === -1) return;
      const length = Number(/content-length: *(\d+)/i.exec(buffered.slice(0, at))?.[1] ?? 0);
      if (buffered.length - at - 4 < length) return;
      buffered = '';
      received += 1;
      for (const piece of reply) {
        socket.write(piece);
        await new Promise((resolve) => setImmediate(resolve));
      }
      socket.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

const INCOMPLETE = 'UPSTREAM_ANSWER_INCOMPLETE';
/** A 2xx whose id the identification answer lacks: kept with the key, as the cloud's (accepted-creations-kept). */
const NO_ID = INCOMPLETE;

/**
 * answer → [the cloud's code, or the created id; the identification's code, or its id; upstream requests the cloud's
 * two calls make (a kept answer is read again without one; a released key sends again)].
 */
const TABLE: Array<[string, Reply, string, string, number]> = [
  ['200 text/plain, not JSON', answer(200, 'created!', { 'content-type': 'text/plain' }), INCOMPLETE, NO_ID, 1],
  ['200 JSON null', answer(200, 'null'), INCOMPLETE, NO_ID, 1],
  ['200 JSON array', answer(200, '[{"id":"in-a-list"}]'), INCOMPLETE, NO_ID, 1],
  ['200 JSON string', answer(200, '"an-id"'), INCOMPLETE, NO_ID, 1],
  ['200 JSON that does not parse', answer(200, '{"id":"half'), INCOMPLETE, NO_ID, 1],
  [
    '200 cut short of its Content-Length',
    ['HTTP/1.1 200 OK\r\ncontent-length: 99\r\n\r\n{"id":"x'],
    'UPSTREAM_UNAVAILABLE',
    'UPSTREAM_OUTCOME_UNKNOWN',
    4,
  ],
  [
    '200 longer than its Content-Length',
    answer(200, '{"id":"trailing"}', { 'content-length': '5' }),
    INCOMPLETE,
    NO_ID,
    1,
  ],
  [
    '200 JSON sent as text/html',
    answer(200, '{"id":"as-html"}', { 'content-type': 'text/html' }),
    'id as-html',
    'id as-html',
    1,
  ],
  [
    '200 gzip the gateway never asked for',
    answer(200, zlib.gzipSync('{"id":"zipped"}'), { 'content-encoding': 'gzip' }),
    INCOMPLETE,
    NO_ID,
    1,
  ],
  ['200 id a number', answer(200, '{"id":12345}'), 'id 12345', 'id 12345', 1],
  ['200 id an empty string', answer(200, '{"id":""}'), INCOMPLETE, NO_ID, 1],
  ['200 id an object', answer(200, '{"id":{"uuid":"x"}}'), INCOMPLETE, NO_ID, 1],
  // An id no store keeps as given (PostgreSQL refuses NUL in text; UTF-8 has no lone surrogate), or past 1,024
  // characters: an answer whose id cannot be read.
  ['200 id holding a NUL', answer(200, '{"id":"a\\u0000b"}'), INCOMPLETE, NO_ID, 1],
  ['200 id holding a newline', answer(200, '{"id":"a\\nb"}'), INCOMPLETE, NO_ID, 1],
  ['200 id a lone surrogate', answer(200, '{"id":"x\\ud800"}'), INCOMPLETE, NO_ID, 1],
  ['200 id of 1,025 characters', answer(200, `{"id":"${'i'.repeat(1025)}"}`), INCOMPLETE, NO_ID, 1],
  [
    '200 id of 1,024 characters',
    answer(200, `{"id":"${'i'.repeat(1024)}"}`),
    `id ${'i'.repeat(1024)}`,
    `id ${'i'.repeat(1024)}`,
    1,
  ],
  [
    '200 duplicate headers',
    answer(200, '{"id":"dup"}', { 'x-a': '1\r\nx-a: 2\r\ncontent-type: text/plain' }),
    'id dup',
    'id dup',
    1,
  ],
  [
    '100 Continue unasked, then 200',
    ['HTTP/1.1 100 Continue\r\n\r\n', ...answer(200, '{"id":"after-100"}')],
    'UPSTREAM_UNAVAILABLE',
    'UPSTREAM_OUTCOME_UNKNOWN',
    4,
  ],
  ['204 where a body is due', ['HTTP/1.1 204 No Content\r\n\r\n'], INCOMPLETE, NO_ID, 1],
  // A redirect answering a creation is not followed and may hide a creation: the outcome is unknown, and the key stays
  // bound to its request, so the second call sends the same key again (docs/decisions/166).
  [
    '302 to another host',
    answer(302, '', { location: 'http://elsewhere.invalid/steal' }),
    'UPSTREAM_OUTCOME_UNKNOWN',
    'UPSTREAM_OUTCOME_UNKNOWN',
    2,
  ],
  [
    '400 binary body',
    answer(400, Buffer.from([0, 1, 0xff, 0x1b, 0x5b]), { 'content-type': 'application/octet-stream' }),
    'UPSTREAM_REJECTED',
    'BAD_USER_INPUT',
    2,
  ],
  [
    '429 Retry-After negative',
    answer(429, '', { 'retry-after': '-5' }),
    'UPSTREAM_UNAVAILABLE',
    'UPSTREAM_UNAVAILABLE',
    4,
  ],
  [
    '429 Retry-After huge',
    answer(429, '', { 'retry-after': '99999999999999999999' }),
    'UPSTREAM_UNAVAILABLE',
    'UPSTREAM_UNAVAILABLE',
    2,
  ],
  [
    '429 Retry-After a past date',
    answer(429, '', { 'retry-after': 'Wed, 21 Oct 2015 07:28:00 GMT' }),
    'UPSTREAM_UNAVAILABLE',
    'UPSTREAM_UNAVAILABLE',
    4,
  ],
  [
    '429 Retry-After a far date',
    answer(429, '', { 'retry-after': 'Fri, 01 Jan 2100 00:00:00 GMT' }),
    'UPSTREAM_UNAVAILABLE',
    'UPSTREAM_UNAVAILABLE',
    2,
  ],
  [
    '503 Retry-After not a date',
    answer(503, '', { 'retry-after': 'soon' }),
    'UPSTREAM_UNAVAILABLE',
    'UPSTREAM_OUTCOME_UNKNOWN',
    4,
  ],
];

const API_KEY = 'bad-answers-app';
const IDENTIFY = `mutation($input: CreateIdentificationInput!, $key: UUID) {
  createIdentification(input: $input, idempotencyKey: $key) { identification { id } replayed }
}`;
const READ_IDENTIFICATION = `query($id: ID!) { identification(id: $id) { id } }`;
/** Words of drivers' own messages, and the stand-in's address, that must not reach the app. */
const RAW = /127\.0\.0\.1|elsewhere\.invalid|HTTPParserError|does not match the HTTP|bad response|other side closed/i;

describe('bad answers of an upstream', () => {
  let gw: TestGateway;
  /**
   * The gateway the identity calls go through: its own ledger, since the stand-in answers both endpoints with the same
   * id, which one ledger holds for the project created first.
   */
  let identityGw: TestGateway;
  // A function: the stand-in's address is known once the outer beforeAll has run.
  const env = () => ({
    GATEWAY_API_KEYS: API_KEY,
    CLOUD_API_URL: url,
    CLOUD_API_TOKEN: 'service-account-token',
    IDENTIFICATION_API_URL: url,
    IDENTIFICATION_API_TOKEN: 'identification-token',
    SANDBOX_UPSTREAMS: 'verification,rfm,mobile-id',
    SANDBOX_CALLBACK_DELAY_MS: '600000',
    UPSTREAM_MAX_RETRIES: '1',
    UPSTREAM_RETRY_BUDGET: '5s',
    // Every reply of the stand-in ends its connection: no row waits for the attempt timeout. It only has to outlast a
    // stall of a loaded machine during a round trip that is answered, as 60 s does (stalls over 1 s have been seen).
    UPSTREAM_TIMEOUT: '60s',
    UPSTREAM_CIRCUIT_BREAKER: 'off',
  });
  beforeAll(async () => {
    gw = await startTestGateway(env());
    identityGw = await startTestGateway(env());
  });
  afterAll(() => Promise.all([gw.close(), identityGw.close()]));

  /** The code of an answer, or `id <id>` when it created; the same for both calls of a key. */
  async function outcome(query: string, input: Record<string, unknown>, on = gw): Promise<string[]> {
    const key = randomUUID();
    const seen: string[] = [];
    for (let call = 0; call < 2; call++) {
      const res = await on.graphql(query, { input, key }, { key: API_KEY });
      expect(res.status).toBe(200);
      expect(JSON.stringify(res)).not.toMatch(RAW);
      const payload = res.data && Object.values(res.data)[0];
      if (payload) {
        expect(payload.replayed).toBe(call === 1);
        const created = (payload.project ?? payload.identification) as { id: string };
        seen.push(`id ${created.id}`);
        // A creation the app is told of is one it can read.
        if (payload.identification) {
          const read = await on.graphql(READ_IDENTIFICATION, { id: created.id }, { key: API_KEY });
          expect(read.data!.identification).toEqual({ id: created.id });
        }
      } else seen.push(res.errors![0]!.extensions!.code);
    }
    return seen;
  }

  it.each(TABLE)('%s', async (_label, answer, cloud, identification, cloudRequests) => {
    reply = answer;
    received = 0;
    const projectsBefore = (await gw.graphql('{ projects { id } }', {}, { key: API_KEY })).data!.projects.length;
    expect(await outcome(M.project, { name: 'bad-answer' })).toEqual([cloud, cloud]);
    expect(received).toBe(cloudRequests);
    const projectsAfter = (await gw.graphql('{ projects { id } }', {}, { key: API_KEY })).data!.projects.length;
    // Recorded in the ledger only when the answer named its id.
    expect(projectsAfter - projectsBefore).toBe(cloud.startsWith('id ') ? 1 : 0);
    const sentBefore = received;
    expect(await outcome(IDENTIFY, { workflowId: 'wf-bad-answer' }, identityGw)).toEqual([
      identification,
      identification,
    ]);
    // A kept answer is read again on the retry, not sent again.
    if (identification === INCOMPLETE) expect(received - sentBefore).toBe(1);
  });

  it('leaves the gateways healthy', async () => {
    for (const g of [gw, identityGw]) {
      const health = await fetch(`${g.url}/healthz`);
      expect(health.status).toBe(200);
    }
  });
});
