import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';
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

  it.each([
    ['ctr1', true],
    ['gcm1', false],
  ])(
    '%s: seals every value under a fresh IV (IVs come from a pool refilled every 16 KiB) and opens each one',
    (format, keptCipher) => {
      const box = new SecretBox(randomBytes(32), { keptCipher });
      const ivs = new Set<string>();
      const sealed: string[] = [];
      for (let i = 0; i < 2_500; i++) {
        const value = box.seal(`token-${i}`, `req-${i}\u0000access_token`);
        sealed.push(value);
        expect(value.startsWith(`${format}.`)).toBe(true);
        ivs.add(value.split('.')[2]!);
      }
      expect(ivs.size).toBe(2_500);
      for (let i = 0; i < 2_500; i += 97) expect(box.open(sealed[i]!, `req-${i}\u0000access_token`)).toBe(`token-${i}`);
      expect(() => box.open(sealed[0]!, 'req-1\u0000access_token')).toThrow();
    },
  );

  /** The derived key of `info`, as the box derives its keys from the master key. */
  const derived = (master: Buffer, info: string) => Buffer.from(hkdfSync('sha256', master, Buffer.alloc(0), info, 32));
  const b64 = (text: string) => Buffer.from(text, 'base64url');

  it("ctr1 is OpenSSL's AES-256-CTR of the UTF-8 text from its IV, tagged by createHmac's HMAC-SHA256 of iv ‖ u32be(context bytes) ‖ context ‖ ciphertext, under keys of their own", () => {
    const texts = ['', 'a', 'x'.repeat(16), 'x'.repeat(17), 'é'.repeat(700), '{"sub":"79001234567","fields":{}}'];
    const contexts = ['', 'ctx', '["4","app","id","personal"]', 'сеть\u0000🌐'];
    for (let k = 0; k < 20; k++) {
      const master = randomBytes(32);
      const box = new SecretBox(master);
      const encKey = derived(master, 'gateway seal aes-256-ctr v1');
      const macKey = derived(master, 'gateway seal hmac-sha256 v1');
      for (const text of texts)
        for (const context of contexts) {
          const [format, keyId, iv, ct, tag, more] = box.seal(text, context).split('.');
          expect([format, keyId, more]).toEqual(['ctr1', box.keyId, undefined]);
          expect(b64(iv!)).toHaveLength(16);
          const reference = createCipheriv('aes-256-ctr', encKey, b64(iv!));
          expect(b64(ct!).equals(Buffer.concat([reference.update(text, 'utf8'), reference.final()]))).toBe(true);
          const length = Buffer.alloc(4);
          length.writeUInt32BE(Buffer.byteLength(context, 'utf8'));
          const mac = createHmac('sha256', macKey)
            .update(Buffer.concat([b64(iv!), length, Buffer.from(context, 'utf8'), b64(ct!)]))
            .digest()
            .subarray(0, 16);
          expect(b64(tag!).equals(mac)).toBe(true);
        }
    }
  });

  it("gcm1 is OpenSSL's AES-256-GCM under the derived encryption key, as every value sealed before ctr1", () => {
    const master = randomBytes(32);
    const sealed = new SecretBox(master, { keptCipher: false }).seal('token', 'ctx');
    const [, , iv, ct, tag] = sealed.split('.');
    const d = createDecipheriv('aes-256-gcm', derived(master, 'gateway token encryption v1'), b64(iv!));
    d.setAAD(Buffer.from('ctx'));
    d.setAuthTag(b64(tag!));
    expect(Buffer.concat([d.update(b64(ct!)), d.final()]).toString('utf8')).toBe('token');
  });

  it('either setting opens both formats: values sealed before the switch, or by a replica set otherwise, still read', () => {
    const master = randomBytes(32);
    const kept = new SecretBox(master, { keptCipher: true });
    const gcm = new SecretBox(master, { keptCipher: false });
    for (const [by, reader] of [
      [kept, gcm],
      [gcm, kept],
      [kept, kept],
      [gcm, gcm],
    ] as const) {
      const value = by.seal('id_token é 🌐', 'record\u0000owner');
      expect(reader.open(value, 'record\u0000owner')).toBe('id_token é 🌐');
    }
  });

  it.each([
    ['ctr1', true],
    ['gcm1', false],
  ])('%s: an altered value, another context, another key or another shape opens nothing', (_format, keptCipher) => {
    const master = randomBytes(32);
    const box = new SecretBox(master, { keptCipher });
    const sealed = box.seal('secret-token', 'event-1\u0000personal');
    const parts = sealed.split('.');
    const flip = (part: string) => {
      const bytes = b64(part);
      bytes[bytes.length - 1]! ^= 1;
      return bytes.toString('base64url');
    };
    for (const i of [2, 3, 4]) {
      const altered = parts.slice();
      altered[i] = flip(parts[i]!);
      expect(() => box.open(altered.join('.'), 'event-1\u0000personal')).toThrow();
    }
    // A tag cut to 4 or 12 bytes (GCM takes a tag that short unless told its length), an IV one byte short, a stray
    // character in a part (Node's base64url decoder skips it), an added part, a swapped format name.
    for (const bytes of [4, 12]) {
      const cut = [...parts.slice(0, 4), b64(parts[4]!).subarray(0, bytes).toString('base64url')].join('.');
      expect(() => box.open(cut, 'event-1\u0000personal')).toThrow();
    }
    const shortIv = [parts[0], parts[1], b64(parts[2]!).subarray(1).toString('base64url'), parts[3], parts[4]];
    expect(() => box.open(shortIv.join('.'), 'event-1\u0000personal')).toThrow();
    for (const i of [2, 3, 4]) {
      const stray = parts.slice();
      stray[i] = `${parts[i]}*`;
      expect(() => box.open(stray.join('.'), 'event-1\u0000personal')).toThrow('not a sealed value');
    }
    expect(() => box.open([...parts.slice(0, 4), parts[4]!.slice(0, 8)].join('.'), 'event-1\u0000personal')).toThrow();
    expect(() => box.open([...parts, 'x'].join('.'), 'event-1\u0000personal')).toThrow('not a sealed value');
    const other = parts[0] === 'ctr1' ? 'gcm1' : 'ctr1';
    expect(() => box.open([other, ...parts.slice(1)].join('.'), 'event-1\u0000personal')).toThrow();
    expect(() => box.open(sealed, 'event-2\u0000personal')).toThrow();
    expect(() => box.open(sealed, 'event-1\u0000personal\u0000')).toThrow();
    expect(() => new SecretBox(randomBytes(32), { keptCipher }).open(sealed, 'event-1\u0000personal')).toThrow(
      /sealed under key/,
    );
    // Untouched, under its own context, it opens.
    expect(box.open(sealed, 'event-1\u0000personal')).toBe('secret-token');
  });
});
