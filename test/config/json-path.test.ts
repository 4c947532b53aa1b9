import { describe, expect, it } from 'vitest';

import { answerId } from '../../src/config/json-path.js';

describe('answerId', () => {
  it.each([
    ['abc', 'abc'],
    [42, '42'],
    // Beyond 2^53 JSON.parse rounds: two ids the upstream gave would be one in the ledger, and the wrong one sent on.
    [12345678901234567890, null],
    [9007199254740993, null],
    [1.5, null],
    [Infinity, null],
    ['', null],
    ['a\u0000b', null],
  ])('reads %j as %j', (value, id) => {
    expect(answerId(value)).toBe(id);
  });
});
