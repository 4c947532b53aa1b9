// The cursor codec's AES-CTR (src/events/cursor.ts aesCtr) reuses one single-block cipher instead of making an
// `aes-256-ctr` cipher per cursor: it must give the very bytes Node's aes-256-ctr gives, for any key, any initial
// counter block (those about to carry over included) and any length a cursor may have. Its tag is HMAC-SHA256 made
// from the key's pads and two one-shot hashes instead of an Hmac object per cursor: it must be createHmac's.
import { createCipheriv, createHmac } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import { CursorCodec, Position } from '../../src/events/cursor.js';
import { aesCtr } from '../../src/secret.js';

const ecb = (key: Uint8Array) => createCipheriv('aes-256-ecb', key, null).setAutoPadding(false);
const nodeCtr = (key: Uint8Array, iv: Uint8Array, data: Uint8Array) => {
  const c = createCipheriv('aes-256-ctr', key, iv);
  return Buffer.concat([c.update(data), c.final()]);
};

describe('the cursor codec’s AES-CTR', () => {
  it('gives the bytes of aes-256-ctr for any key, counter block and length up to a cursor’s 4 KB', () => {
    // Counter blocks whose low bytes are at or near 0xff carry into the bytes above; all-0xff wraps to zero.
    const nearCarry = fc
      .tuple(fc.uint8Array({ minLength: 8, maxLength: 8 }), fc.integer({ min: 0, max: 8 }))
      .map(([high, ffs]) => Buffer.concat([Buffer.from(high), Buffer.alloc(8 - ffs, 0x42), Buffer.alloc(ffs, 0xff)]));
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 32, maxLength: 32 }),
        fc.oneof(fc.uint8Array({ minLength: 16, maxLength: 16 }), nearCarry, fc.constant(Buffer.alloc(16, 0xff))),
        fc.uint8Array({ minLength: 0, maxLength: 4096, size: 'max' }),
        (key, iv, data) => {
          const blocks = ecb(key);
          expect(aesCtr(blocks, Buffer.from(iv), Buffer.from(data)).equals(nodeCtr(key, iv, data))).toBe(true);
          // The same cipher object serves the next call unchanged (no state carried between calls).
          expect(aesCtr(blocks, Buffer.from(iv), Buffer.from(data)).equals(nodeCtr(key, iv, data))).toBe(true);
        },
      ),
      { numRuns: 300, endOnFailure: true },
    );
  });

  it('carries the counter over into the bytes above, and wraps an all-ones block to zero, as aes-256-ctr does', () => {
    const key = Buffer.alloc(32, 7);
    const data = Buffer.alloc(64);
    for (const iv of [Buffer.alloc(16, 0xff), Buffer.concat([Buffer.alloc(13, 0x42), Buffer.alloc(3, 0xff)])])
      expect(aesCtr(ecb(key), iv, data).equals(nodeCtr(key, iv, data))).toBe(true);
  });

  it('seals a cursor that aes-256-ctr opens: the tag, then the position text with the tag as counter block', () => {
    const enc = Buffer.alloc(32, 2);
    const codec = new CursorCodec(Buffer.alloc(32, 1), enc);
    const at = Date.UTC(2026, 10, 28);
    const position = new Position(41);
    position.ranges.push(43, 45);
    const bytes = Buffer.from(codec.encode(position, at), 'base64url');
    const text = nodeCtr(enc, bytes.subarray(0, 16), bytes.subarray(16)).toString('latin1');
    expect(text).toBe(`2_${at / 1000}_41_43-45`);
    expect(codec.decode(bytes.toString('base64url'), Infinity).position).toEqual(position);
  });
  it('tags a cursor with createHmac’s HMAC-SHA256 of its text, for any MAC key and position, and opens only those', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 32, maxLength: 32 }),
        fc.integer({ min: 0, max: 2 ** 40 }),
        fc.array(fc.integer({ min: 1, max: 1000 }), { maxLength: 24 }),
        fc.integer({ min: 0, max: 2 ** 41 }),
        (macKey, floor, steps, at) => {
          const enc = Buffer.alloc(32, 9);
          const codec = new CursorCodec(Buffer.from(macKey), enc);
          const position = new Position(floor);
          let next = floor + 1;
          for (let i = 0; i + 1 < steps.length; i += 2) {
            position.ranges.push(next + steps[i]!, next + steps[i]! + steps[i + 1]! - 1);
            next = position.ranges.at(-1)! + 2;
          }
          const bytes = Buffer.from(codec.encode(position, at), 'base64url');
          const tag = bytes.subarray(0, 16);
          const text = nodeCtr(enc, tag, bytes.subarray(16));
          expect(tag.equals(createHmac('sha256', macKey).update(text).digest().subarray(0, 16))).toBe(true);
          expect(codec.decode(bytes.toString('base64url'), Infinity).position).toEqual(position);
          // Another MAC key does not open it.
          const other = Buffer.from(macKey);
          other[0]! ^= 1;
          expect(() => new CursorCodec(other, enc).decode(bytes.toString('base64url'), Infinity)).toThrow(
            'not a cursor this gateway handed out',
          );
        },
      ),
      { numRuns: 300 },
    );
  });
});
