// The cursor codec's AES-CTR (src/events/cursor.ts aesCtr) reuses one single-block cipher instead of making an
// `aes-256-ctr` cipher per cursor: it must give the very bytes Node's aes-256-ctr gives, for any key, any initial
// counter block (those about to carry over included) and any length a cursor may have.
import { createCipheriv } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import { aesCtr, CursorCodec, Position } from '../../src/events/cursor.js';

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
});
