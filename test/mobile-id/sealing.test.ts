import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import { SecretBox } from '../../src/secret.js';

describe('SecretBox', () => {
  it('seals every value under a fresh IV (IVs come from a pool refilled every 1,024 seals) and opens each one', () => {
    const box = new SecretBox(randomBytes(32));
    const ivs = new Set<string>();
    const sealed: string[] = [];
    for (let i = 0; i < 2_500; i++) {
      const value = box.seal(`token-${i}`, `req-${i}\u0000access_token`);
      sealed.push(value);
      ivs.add(value.split('.')[2]!);
    }
    expect(ivs.size).toBe(2_500);
    for (let i = 0; i < 2_500; i += 97) expect(box.open(sealed[i]!, `req-${i}\u0000access_token`)).toBe(`token-${i}`);
    expect(() => box.open(sealed[0]!, 'req-1\u0000access_token')).toThrow();
  });
});
