// A JWKS file (AUTH_JWKS_FILE, an AUTH_ISSUERS entry's jwksFile, MOBILEID_JWKS_FILE) whose keys the gateway cannot
// verify signatures with: a key of a type, curve, alg or use it does not verify with. With no usable key at all (or
// none at all) the file stops start-up, and a reload refuses it keeping the keys in force, in the same words: the
// variable, the file, and each key's kid and why. Beside usable keys, such keys are passed over with one warning per
// read that names each of them. A key of a kind it verifies with whose numbers are malformed is the file's mistake,
// refused wherever it stands. Real gateways; the files are rewritten between steps.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { exportJWK, generateKeyPair } from 'jose';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';

import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import { AUDIENCE, ISSUER, sign, signingKey, type SigningKey } from '../helpers/jwt.js';
import { OPERATOR_CLIENT_ID, OPERATOR_ISSUER, postNotification, signedNotification } from '../helpers/mobile-id.js';

const APP_KEY = 'app-key-0123456789abcdef';
const ROOT_KEY = 'root-key-0123456789abcdef';
const NOTIFY = 'operator-notification-token';

const running: TestGateway[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((t) => t.close()));
});

/** An RSA public key of 2048 bits as a JWK, which `edit` rewrites. */
const rsa = (edit: (jwk: Record<string, unknown>) => Record<string, unknown>) =>
  edit({ ...generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ format: 'jwk' }) });

/** Keys of every kind the gateway cannot verify with, each with its kid and the reason the gateway gives. */
const UNUSABLE: Array<{ jwk: Record<string, unknown>; reason: string }> = [
  {
    jwk: {
      ...generateKeyPairSync('ec', { namedCurve: 'secp256k1' }).publicKey.export({ format: 'jwk' }),
      kid: 'k-curve',
    },
    reason: 'its crv "secp256k1" is no curve the gateway verifies with (P-256, P-384, P-521)',
  },
  {
    jwk: rsa((k) => ({ ...k, kid: 'k-alg', alg: 'HS256' })),
    reason: 'its alg "HS256" is not an algorithm of its key type (RS256, RS384, RS512, PS256, PS384, PS512)',
  },
  {
    jwk: rsa((k) => ({ ...k, kid: 'k-enc', use: 'enc', alg: 'RSA-OAEP' })),
    reason: 'its use "enc" is not "sig": it is no signing key',
  },
  { jwk: { kty: 'XYZ', kid: 'k-type', use: 'sig' }, reason: 'its kty "XYZ" is no key type the gateway verifies with' },
];

/** The text of a JWKS file of `keys`, two spaces a level, and the line each key begins on. */
function jwksText(keys: readonly Record<string, unknown>[]): { text: string; lines: number[] } {
  const text = JSON.stringify({ keys }, null, 2);
  const lines: number[] = [];
  text.split('\n').forEach((line, i) => {
    if (line === '    {') lines.push(i + 1);
  });
  return { text, lines };
}

/** One of the three variables that name a JWKS file: the gateway's variables, and how a key is seen to verify. */
interface JwksVariable {
  variable: 'AUTH_JWKS_FILE' | 'AUTH_ISSUERS' | 'MOBILEID_JWKS_FILE';
  /** The variables of a gateway whose JWKS file is `file` (in `dir`). */
  env(dir: string, file: string): Record<string, string>;
  /** Whether a signature by `key` is accepted: a JWT, or a mobile-ID notification's id_token. */
  accepts(t: TestGateway, key: SigningKey): Promise<boolean>;
}

let notifications = 0;
const VARIABLES: JwksVariable[] = [
  {
    variable: 'AUTH_JWKS_FILE',
    env: (_dir, file) => ({ AUTH_JWKS_FILE: file, AUTH_ISSUER: ISSUER, AUTH_AUDIENCE: AUDIENCE, AUTH_APPS: 'portal' }),
    accepts: async (t, key) =>
      (await t.graphql('{ __typename }', undefined, { key: await sign(key, { claims: { azp: 'portal' } }) })).status ===
      200,
  },
  {
    variable: 'AUTH_ISSUERS',
    env: (dir, file) => {
      const issuers = path.join(dir, 'issuers.yaml');
      fs.writeFileSync(
        issuers,
        `issuers:\n  - issuer: ${ISSUER}\n    jwksFile: ${path.basename(file)}\n    audience: ${AUDIENCE}\n    apps: [portal]\n`,
      );
      return { AUTH_ISSUERS: issuers };
    },
    accepts: async (t, key) =>
      (await t.graphql('{ __typename }', undefined, { key: await sign(key, { claims: { azp: 'portal' } }) })).status ===
      200,
  },
  {
    variable: 'MOBILEID_JWKS_FILE',
    env: (_dir, file) => ({
      MOBILEID_JWKS_FILE: file,
      MOBILEID_ISSUER: OPERATOR_ISSUER,
      MOBILEID_CLIENT_ID: OPERATOR_CLIENT_ID,
      MOBILEID_NOTIFICATION_TOKENS: `app:${NOTIFY}`,
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
    }),
    accepts: async (t, key) => {
      notifications += 1;
      const body = await signedNotification(key.privateKey, `jwks-file-${notifications}`, { kid: key.kid });
      return (await postNotification(t, body, { token: NOTIFY })).status === 204;
    },
  },
];

/** A gateway whose JWKS file (named by `v`) holds `keys`, or the error its start stopped with. */
async function start(
  v: JwksVariable,
  keys: readonly Record<string, unknown>[],
): Promise<{ file: string; lines: number[]; started: () => Promise<TestGateway> }> {
  const dir = tempDataDir('jwks-file-');
  const file = path.join(dir, 'jwks.json');
  const { text, lines } = jwksText(keys);
  fs.writeFileSync(file, text);
  return {
    file,
    lines,
    started: async () => {
      const t = await startTestGateway({
        GATEWAY_API_KEYS: `app:${APP_KEY}`,
        OPERATOR_API_KEYS: `root:${ROOT_KEY}`,
        ...v.env(dir, file),
      });
      running.push(t);
      return t;
    },
  };
}

/** The refusal's words for a file whose keys are `UNUSABLE` at `lines`, after "<variable>: <file> line <n>: ". */
function noUsableKey(lines: number[]): string[] {
  return UNUSABLE.map(({ jwk, reason }, i) => `keys[${i}] (kid "${jwk.kid as string}", line ${lines[i]!}): ${reason}`);
}

async function reload(t: TestGateway) {
  const res = await request(`${t.url}/admin/reload`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ROOT_KEY}` },
  });
  return { status: res.statusCode, body: (await res.body.json()) as Record<string, any> };
}

/** The warnings that name keys of a JWKS file passed over, as logged. */
function passedOverWarnings(t: TestGateway): Array<Record<string, any>> {
  return t
    .logs()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, any>)
    .filter((l) => l.level === 40 && Array.isArray(l.passedOver));
}

describe('a JWKS file with no key the gateway can verify signatures with', () => {
  it.each(VARIABLES.map((v) => [v.variable, v] as const))(
    '%s: start-up stops naming the variable, the file, and each key with its kid, its line and why',
    async (variable, v) => {
      const { file, lines, started } = await start(
        v,
        UNUSABLE.map((k) => k.jwk),
      );
      const refusal = await started().then(
        () => null,
        (err: Error) => err.message,
      );
      expect(refusal).not.toBeNull();
      expect(refusal).toContain(
        `${variable}: ${file} line ${lines[0]!}: holds no key the gateway can verify signatures with: `,
      );
      for (const words of noUsableKey(lines)) expect(refusal).toContain(words);
    },
  );

  it.each(VARIABLES.map((v) => [v.variable, v] as const))(
    '%s holding no key at all ("keys": []) stops start-up, saying so',
    async (variable, v) => {
      const { file, started } = await start(v, []);
      await expect(started()).rejects.toThrow(
        `${variable}: ${file} line 2: holds no key ("keys" is empty): a JWKS file needs at least one public key the gateway can verify signatures with`,
      );
    },
  );

  it.each([
    [
      'a symmetric key',
      async () => ({ kty: 'oct', kid: 'hmac', k: randomBytes(32).toString('base64url') }),
      /keys\[1\] is a symmetric key \(kty "oct"\)/,
    ],
    [
      'a private key',
      async () => {
        const { privateKey } = await generateKeyPair('ES256', { extractable: true });
        return { ...(await exportJWK(privateKey)), kid: 'private' };
      },
      /keys\[1\] holds a private key \(member "d"\)/,
    ],
    [
      'a key whose modulus is not base64url',
      async () => rsa((k) => ({ ...k, kid: 'k-modulus', n: '!!not-base64url!!' })),
      /keys\[1\] cannot be used: its "n" is not base64url; mend it or remove it/,
    ],
    [
      'an RSA key of 1024 bits',
      async () => ({
        ...generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ format: 'jwk' }),
        kid: 'short',
      }),
      /keys\[1\] cannot be used: it is an RSA key of 1024 bits/,
    ],
  ] as const)(
    '%s beside usable keys still stops start-up: a secret or a key to mend is the file’s mistake',
    async (_what, make, said) => {
      const good = await signingKey('good');
      const { started } = await start(VARIABLES[2]!, [good.publicJwk, await make()]);
      await expect(started()).rejects.toThrow(said);
    },
  );
});

describe('a JWKS file that mixes usable keys with keys the gateway cannot verify with', () => {
  it.each(VARIABLES.map((v) => [v.variable, v] as const))(
    '%s: the gateway starts with the usable keys and warns once naming each key passed over; a reload refuses a file with none usable, in the same words, keeping the keys in force',
    async (variable, v) => {
      const good = await signingKey('good');
      const { file, lines, started } = await start(v, [...UNUSABLE.map((k) => k.jwk), good.publicJwk]);
      const t = await started();
      expect(await v.accepts(t, good)).toBe(true);

      const warned = passedOverWarnings(t);
      expect(warned).toHaveLength(1);
      expect(warned[0]).toMatchObject({ variable, file });
      expect(warned[0]!.passedOver).toEqual(
        UNUSABLE.map(({ jwk, reason }, i) => ({
          kid: jwk.kid,
          line: lines[i],
          reason: expect.stringContaining(reason),
        })),
      );
      for (const words of noUsableKey(lines)) expect(warned[0]!.msg).toContain(words);

      // Rewritten with no usable key: refused in the start's words, and the keys in force are kept.
      const rewritten = jwksText(UNUSABLE.map((k) => k.jwk));
      fs.writeFileSync(file, rewritten.text);
      const refused = await reload(t);
      expect(refused.status).toBe(422);
      expect(refused.body).toMatchObject({ error: 'reload_failed', variable, file, line: rewritten.lines[0] });
      expect(refused.body.error_description).toContain(
        `${variable}: ${file} line ${rewritten.lines[0]!}: holds no key the gateway can verify signatures with: `,
      );
      for (const words of noUsableKey(rewritten.lines)) expect(refused.body.error_description).toContain(words);
      expect(await v.accepts(t, good)).toBe(true);

      // Emptied: refused too.
      fs.writeFileSync(file, JSON.stringify({ keys: [] }));
      const emptied = await reload(t);
      expect(emptied.status).toBe(422);
      expect(emptied.body).toMatchObject({ variable, file, line: 1 });
      expect(emptied.body.error_description).toContain('holds no key ("keys" is empty)');
      expect(await v.accepts(t, good)).toBe(true);
      // Neither refused read warned.
      expect(passedOverWarnings(t)).toHaveLength(1);

      // A new usable key beside the unusable ones: swapped in, with one more warning.
      const next = await signingKey('next');
      const mixed = jwksText([next.publicJwk, UNUSABLE[0]!.jwk]);
      fs.writeFileSync(file, mixed.text);
      expect((await reload(t)).status).toBe(200);
      expect(await v.accepts(t, next)).toBe(true);
      expect(await v.accepts(t, good)).toBe(false);
      const after = passedOverWarnings(t);
      expect(after).toHaveLength(2);
      expect(after[1]!.passedOver).toEqual([
        { kid: 'k-curve', line: mixed.lines[1], reason: expect.stringContaining(UNUSABLE[0]!.reason) },
      ]);
    },
  );
});
