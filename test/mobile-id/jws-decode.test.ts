// The id_token's decode (src/mobile-id/wire.ts decodeJws) reads what jose's decodeProtectedHeader and decodeJwt read,
// and refuses what they refuse: compared on the edges (padding lengths, UTF-8, a BOM, non-objects) and on tokens
// made from seeded random bytes.
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { describe, expect, it } from 'vitest';

import { decodeJws } from '../../src/mobile-id/wire.js';

/** The decode as it was, through jose: the same alphabet check first, then jose's two decoders. */
function throughJose(token: string): unknown {
  if (!/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(token)) return null;
  try {
    const header = decodeProtectedHeader(token) as Record<string, unknown>;
    if (typeof header.alg !== 'string') return null;
    return { header, claims: decodeJwt(token) };
  } catch {
    return null;
  }
}

const part = (bytes: Buffer | string) => Buffer.from(bytes).toString('base64url');
const json = (value: unknown) => part(JSON.stringify(value));
const HEADER = json({ alg: 'RS256', kid: 'k' });

/** A small seeded generator (mulberry32): the same tokens on every run. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('decodeJws', () => {
  const edges: [string, string][] = [
    ['a JWT', `${HEADER}.${json({ sub: 'user-1', n: 1, nested: { a: [1, 2] } })}.sig`],
    ['no signature', `${HEADER}.${json({ sub: 'user-1' })}.`],
    ['claims with non-ASCII text', `${HEADER}.${json({ sub: 'Jürgen 😀', name: 'Zoë' })}.sig`],
    ['a header without alg', `${json({ kid: 'k' })}.${json({ sub: 'x' })}.sig`],
    ['alg not a string', `${json({ alg: 1 })}.${json({ sub: 'x' })}.sig`],
    ['claims that are an array', `${HEADER}.${json([1, 2])}.sig`],
    ['claims that are null', `${HEADER}.${json(null)}.sig`],
    ['claims that are a number', `${HEADER}.${json(5)}.sig`],
    ['a header that is a string', `${json('RS256')}.${json({ sub: 'x' })}.sig`],
    ['claims that are not JSON', `${HEADER}.${part('{"sub":')}.sig`],
    ['claims of invalid UTF-8', `${HEADER}.${part(Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]))}.sig`],
    [
      'claims behind a BOM',
      `${HEADER}.${part(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"sub":"b"}')]))}.sig`,
    ],
    [
      'a header behind a BOM',
      `${part(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"alg":"none"}')]))}.${json({})}.x`,
    ],
    ['a payload of 4n + 1 characters', `${HEADER}.${json({ sub: 'x' })}A.sig`],
    ['a header of 4n + 1 characters', `${HEADER}A.${json({ sub: 'x' })}.sig`],
    ['a payload of one character', `${HEADER}.e.sig`],
    ['non-zero bits after the last byte', `${HEADER}.${json({ sub: 'xy' }).slice(0, -1)}B.sig`],
    ['an empty payload', `${HEADER}..sig`],
    ['four parts', `${HEADER}.${json({ sub: 'x' })}.sig.more`],
    ['a JWE', `${HEADER}..iv.ct.tag`],
    ['padding', `${HEADER}.${Buffer.from('{"sub":"x"}').toString('base64')}.sig`],
    ['an empty string', ''],
  ];

  it.each(edges)('reads %s as jose does', (_name, token) => {
    expect(decodeJws(token)).toEqual(throughJose(token));
  });

  it('reads a valid JWT, and refuses the broken ones', () => {
    // So that the comparison above is not of two decoders that refuse everything.
    const edge = (name: string) => edges.find(([n]) => n === name)![1];
    expect(decodeJws(edge('a JWT'))).toEqual({
      header: { alg: 'RS256', kid: 'k' },
      claims: { sub: 'user-1', n: 1, nested: { a: [1, 2] } },
    });
    expect(decodeJws(edge('claims behind a BOM'))?.claims).toEqual({ sub: 'b' });
    for (const name of [
      'a header without alg',
      'alg not a string',
      'claims that are an array',
      'claims that are null',
      'claims that are a number',
      'a header that is a string',
      'claims that are not JSON',
      'claims of invalid UTF-8',
      'a payload of 4n + 1 characters',
    ])
      expect(decodeJws(edge(name)), name).toBeNull();
  });

  it('agrees with jose on 4,000 tokens made of random bytes and random JSON', () => {
    const next = random(43);
    const bytes = (n: number) => Buffer.from(Array.from({ length: n }, () => Math.floor(next() * 256)));
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)]!;
    const texts = ['{}', '[]', 'null', '{"alg":"ES256"}', '{"sub":"a"}', '"x"', '{"alg":1}', '{"a":{"b":[1,{}]}}'];
    const headers = ['{"alg":"RS256","kid":"k"}', '{"alg":"none"}', ...texts];
    let decoded = 0;
    for (let i = 0; i < 4_000; i++) {
      const piece = (texts: readonly string[]) => {
        const r = next();
        if (r < 0.4) return part(pick(texts));
        if (r < 0.55) return part(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(pick(texts))]));
        if (r < 0.8) return part(bytes(Math.floor(next() * 12)));
        // A valid part cut or lengthened by a character.
        const p = part(pick(texts));
        return next() < 0.5 ? p.slice(0, -1) : `${p}${pick(['A', 'Q', 'w', '-', '_'])}`;
      };
      const token = `${piece(headers)}.${piece(texts)}.${next() < 0.2 ? '' : 'sig'}`;
      const ours = decodeJws(token);
      expect(ours, token).toEqual(throughJose(token));
      if (ours) decoded++;
    }
    // Both kinds are compared: tokens that decode and tokens that do not.
    expect(decoded).toBeGreaterThan(200);
    expect(decoded).toBeLessThan(3_800);
  });
});
