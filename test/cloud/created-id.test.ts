import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import { createdIdBySchema, extractCreatedId } from '../../src/cloud/wire.js';

describe('the created id', () => {
  it('is what the schema answers (its fast path agrees), for any answer made of the fields it reads', () => {
    const idValue = fc.oneof(
      fc.constant(undefined),
      fc.constant(null),
      fc.constant(''),
      fc.string(),
      fc.integer(),
      fc.boolean(),
      fc.constant({}),
    );
    const nested = fc.oneof(
      fc.constant(undefined),
      fc.constant(null),
      fc.string(),
      fc.record({ id: idValue }, { requiredKeys: [] }),
    );
    const body = fc.oneof(
      fc.record(
        { id: idValue, serviceId: idValue, data: nested, metadata: nested, status: fc.string() },
        { requiredKeys: [] },
      ),
      fc.array(fc.string()),
      fc.string(),
      fc.constant(null),
      fc.integer(),
    );
    fc.assert(
      fc.property(body, (b) => {
        expect(extractCreatedId(b)).toBe(createdIdBySchema(b));
      }),
      { numRuns: 2000 },
    );
  });
});
