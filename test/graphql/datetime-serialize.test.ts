// The DateTime scalar's text (src/graphql/scalars.ts isoString) is written by the gateway for the years 1970–9999
// instead of by V8's Date.prototype.toISOString (decision 108): it must be toISOString's text for every instant, and
// V8's own (and its RangeError) outside that range.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import { DateTimeScalar, isoString } from '../../src/graphql/scalars.js';

const YEAR_10000 = 253_402_300_800_000;

describe('the DateTime scalar’s ISO text', () => {
  it('is toISOString’s for any instant from 1970 to the end of 9999, as a Date, a number or a string', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: YEAR_10000 - 1 }), (ms) => {
        const expected = new Date(ms).toISOString();
        expect(isoString(ms)).toBe(expected);
        expect(DateTimeScalar.serialize(new Date(ms))).toBe(expected);
        expect(DateTimeScalar.serialize(ms)).toBe(expected);
        expect(DateTimeScalar.serialize(expected)).toBe(expected);
      }),
      { numRuns: 20_000 },
    );
  });

  it('is toISOString’s at the edges: days, leap days, centuries, the range’s ends and beyond them', () => {
    const edges = [
      0,
      1,
      999,
      86_399_999,
      86_400_000,
      Date.UTC(2000, 1, 29, 23, 59, 59, 999),
      Date.UTC(2000, 2, 1),
      Date.UTC(2100, 1, 28, 12),
      Date.UTC(2100, 2, 1),
      Date.UTC(2400, 1, 29),
      Date.UTC(2026, 10, 29, 22, 30, 0, 5),
      Date.UTC(2026, 11, 31, 23, 59, 59, 990),
      YEAR_10000 - 1,
      YEAR_10000,
      -1,
      -62_198_755_200_000,
      8.64e15,
      1.5,
      Date.UTC(2026, 0, 1) + 0.25,
    ];
    for (const ms of edges) expect(isoString(ms)).toBe(new Date(ms).toISOString());
  });

  it('throws toISOString’s RangeError for an invalid date', () => {
    expect(() => isoString(Number.NaN)).toThrow(RangeError);
    expect(() => DateTimeScalar.serialize(new Date('not a date'))).toThrow(RangeError);
  });
});
