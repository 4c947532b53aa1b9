/**
 * The intake's pieces in process (docs/decisions/094): µs of CPU per call, medians of 5 rounds of `--n`, on scenario
 * 4's notification. The body's checks (`parseNotification`), the canonical JSON and its HMAC, the two seals and their
 * parts (`createCipheriv`, the rest of AES-GCM, the base64url parts), the payload's JSON and its parse back, and the
 * published record made three ways: parsed at once (as `EventLog.append` does), an object literal whose accessors
 * parse on first read (tried, dropped), and a class (which a spread would not copy). From the sources (tsx).
 *
 *   npx tsx bench/experiments/intake-micro.ts [--n 50000]
 */
import { createCipheriv, randomBytes, randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';

import { canonicalJson } from '../../src/fingerprint.js';
import { parseNotification } from '../../src/mobile-id/wire.js';
import { SecretBox } from '../../src/secret.js';
import { notificationBody } from '../scenarios/webhook.js';

const { values: cli } = parseArgs({ options: { n: { type: 'string', default: '50000' } } });
const N = Number(cli.n);
const template = notificationBody();
const bodies = Array.from({ length: 1000 }, () => JSON.parse(template.replace('{{uuid}}', randomUUID())) as unknown);
const box = new SecretBox(randomBytes(32));

function time(name: string, f: (i: number) => unknown): void {
  const sink: unknown[] = new Array(1024);
  const run = () => {
    for (let i = 0; i < N; i++) sink[i & 1023] = f(i);
  };
  run();
  const rounds: number[] = [];
  for (let r = 0; r < 5; r++) {
    const t = process.cpuUsage();
    run();
    const u = process.cpuUsage(t);
    rounds.push((u.user + u.system) / N);
  }
  rounds.sort((a, b) => a - b);
  console.log(`${name.padEnd(40)} ${rounds[2]!.toFixed(2)} µs (${rounds[0]!.toFixed(2)}–${rounds[4]!.toFixed(2)})`);
}

const idToken = (JSON.parse(template) as { id_token: string }).id_token;
time('JSON.parse of the body', (i) => JSON.parse(template.replace('{{uuid}}', String(i))));
time('parseNotification', (i) => parseNotification(bodies[i % 1000]));
time('canonical JSON and its HMAC', (i) => box.digest(canonicalJson(bodies[i % 1000]) ?? ''));
time('seal: the access token', () => box.seal('bench-access-token', '["mobile-id",null,"x","access_token"]'));
const personal = JSON.stringify({ sub: '79001234567', fields: {}, idToken });
time('seal: subject and id_token', () => box.seal(personal, '["mobile-id",null,"x","personal"]'));
const key = randomBytes(32);
const iv = randomBytes(12);
const aad = Buffer.from('["mobile-id",null,"x","access_token"]');
time('createCipheriv alone', () => createCipheriv('aes-256-gcm', key, iv));
time('createCipheriv, AAD, update, final, tag', () => {
  const c = createCipheriv('aes-256-gcm', key, iv);
  c.setAAD(aad);
  c.update('bench-access-token', 'utf8');
  c.final();
  return c.getAuthTag();
});

const payload = {
  v: 3,
  outcome: 'success',
  authReqId: randomUUID(),
  tokenType: 'Bearer',
  accessToken: box.seal('bench-access-token', 'a'),
  expiresIn: 3600,
  expiresAt: Date.now(),
  claims: {
    sub: null,
    acr: '2',
    amr: ['sim'],
    iss: 'https://mobileid.example',
    aud: ['bench'],
    exp: 4102444800,
    iat: 1795000000,
    authReqId: null,
  },
  sealedPersonal: box.seal(personal, 'b'),
  verifiedWith: null,
  checks: {
    signature: 'NOT_CHECKED',
    issuer: 'NOT_CHECKED',
    audience: 'NOT_CHECKED',
    expiry: 'NOT_CHECKED',
    authReqIdClaim: 'NOT_CHECKED',
    atHash: 'NOT_CHECKED',
    strict: false,
    notCheckedReason: 'no JWKS is configured (MOBILEID_JWKS_URL or MOBILEID_JWKS_FILE): the id_token was only decoded',
  },
  jwksUri: null,
  leadingKycMatch: null,
  correlationId: null,
  extra: {},
  sealedExtra: {},
  droppedExtra: null,
};
const meta = {
  requestId: 'bench',
  transactionId: null,
  contentType: 'application/json',
  gatewayRequestId: randomUUID(),
};
const payloadText = JSON.stringify(payload);
const metaText = JSON.stringify(meta);
console.log(`(a payload of ${payloadText.length} characters)`);
time('JSON.stringify of payload and meta', () => [JSON.stringify(payload), JSON.stringify(meta)]);
time('JSON.parse of payload and meta', () => [JSON.parse(payloadText), JSON.parse(metaText)]);

// The published record, three ways; each read once for its kind and time, and given a cursor, as the bus does.
const eager = (seq: number) => ({
  seq,
  kind: 'mobile-id',
  key: 'k',
  dedupeKey: 'd',
  fingerprint: 'f',
  payload: JSON.parse(payloadText) as unknown,
  meta: JSON.parse(metaText) as unknown,
  scope: null,
  receivedAt: new Date(seq),
});
const lazy = (seq: number) => {
  let parsed: unknown;
  let read = false;
  let m: unknown;
  return {
    seq,
    kind: 'mobile-id',
    key: 'k',
    dedupeKey: 'd',
    fingerprint: 'f',
    get payload(): unknown {
      if (!read) ((parsed = JSON.parse(payloadText)), (read = true));
      return parsed;
    },
    set payload(v: unknown) {
      ((parsed = v), (read = true));
    },
    get meta(): unknown {
      return (m ??= JSON.parse(metaText));
    },
    set meta(v: unknown) {
      m = v;
    },
    scope: null,
    receivedAt: new Date(seq),
  };
};
class Written {
  readonly kind = 'mobile-id';
  constructor(
    readonly seq: number,
    private readonly payloadText: string,
    readonly receivedAt: Date,
  ) {}
  get payload(): unknown {
    return JSON.parse(this.payloadText);
  }
}
const use = (e: { kind: string; receivedAt: Date }) => {
  (e as { cursor?: string }).cursor = 'c';
  return e.kind.length + e.receivedAt.getTime();
};
time('record: parsed at once', (i) => use(eager(i)));
time('record: accessors parse on first read', (i) => use(lazy(i)));
time('record: a class (not copied by a spread)', (i) => use(new Written(i, payloadText, new Date(i))));
