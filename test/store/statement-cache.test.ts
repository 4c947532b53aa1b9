import { describe, expect, it } from 'vitest';

import { StatementCache } from '../../src/store/sqlite-dialect.js';

describe('the prepared-statement cache', () => {
  it('gives back what it keeps, and nothing for a text it never kept', () => {
    const cache = new StatementCache<string>(4);
    cache.keep('select 1', 'one');
    expect(cache.find('select 1')).toBe('one');
    expect(cache.find('select 2')).toBeUndefined();
  });

  it('keeps at most its capacity, dropping the oldest when none was used since it was kept', () => {
    const cache = new StatementCache<number>(3);
    for (let i = 0; i < 5; i++) cache.keep(`q${i}`, i);
    expect(cache.size).toBe(3);
    expect([0, 1, 2, 3, 4].map((i) => cache.find(`q${i}`))).toEqual([undefined, undefined, 2, 3, 4]);
  });

  it('keeps a statement used again over a stream of one-off texts', () => {
    const cache = new StatementCache<string>(8);
    cache.keep('hot', 'prepared once');
    for (let i = 0; i < 100; i++) {
      expect(cache.find('hot')).toBe('prepared once');
      if (cache.find(`one-off ${i}`) === undefined) cache.keep(`one-off ${i}`, `p${i}`);
    }
    expect(cache.size).toBe(8);
    expect(cache.find('one-off 0')).toBeUndefined();
  });

  it('drops an entry that was not used since the last sweep before one that was', () => {
    const cache = new StatementCache<string>(3);
    cache.keep('a', 'A');
    cache.keep('b', 'B');
    cache.keep('c', 'C');
    cache.find('a');
    cache.keep('d', 'D'); // a was used: b goes
    expect(cache.find('b')).toBeUndefined();
    expect(['a', 'c', 'd'].map((k) => cache.find(k))).toEqual(['A', 'C', 'D']);
  });
});
