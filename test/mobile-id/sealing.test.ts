import { createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import { SecretBox } from '../../src/secret.js';

describe('SecretBox', () => {
  it("digests as createHmac's HMAC-SHA256 under the derived digest key, for any key and text (empty, around a block, long, not ASCII, a lone surrogate)", () => {
    const texts = [
      '',
      'a',
      'x'.repeat(63),
      'x'.repeat(64),
      'x'.repeat(65),
      `request-fingerprint\u0000${JSON.stringify({ operation: 'createNetwork', request: { title: 'сеть 🌐' } })}`,
      'é'.repeat(5000),
      'lone \ud800 surrogate',
      randomBytes(300).toString('latin1'),
    ];
    for (let k = 0; k < 200; k++) {
      const master = randomBytes(32);
      const box = new SecretBox(master);
      // The digest key as the box derives it; HMAC's own construction (createHmac) is the reference.
      const key = Buffer.from(hkdfSync('sha256', master, Buffer.alloc(0), 'gateway token digest v1', 32));
      const random = randomBytes(1 + (k % 300)).toString(k % 2 ? 'latin1' : 'base64');
      for (const text of [...texts, random]) {
        expect(box.digest(text)).toBe(createHmac('sha256', key).update(text, 'utf8').digest('hex'));
      }
    }
    // Another key digests the same text otherwise.
    expect(new SecretBox(randomBytes(32)).digest('same')).not.toBe(new SecretBox(randomBytes(32)).digest('same'));
  });

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
