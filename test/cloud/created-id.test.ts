import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import { createdIdByGuesses, extractCreatedId } from '../../src/cloud/wire.js';

describe('the created id', () => {
  it('is what the guesses read (its fast path agrees), for any answer made of the fields they read', () => {
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
        expect(extractCreatedId(b)).toBe(createdIdByGuesses(b));
      }),
      { numRuns: 2000 },
    );
  });

  const ID = 'b6f1c1a0-0000-4000-8000-000000000001';
  it.each([
    ['id is null', { id: null, serviceId: ID }],
    ['id is empty', { id: '', data: { id: ID } }],
    ['id is an object', { id: { value: 1 }, metadata: { id: ID } }],
    ['serviceId is null', { serviceId: null, data: { id: ID } }],
    ['serviceId is a boolean, data.id is empty', { serviceId: true, data: { id: '' }, metadata: { id: ID } }],
    ['data is a string', { id: [], data: 'created', metadata: { id: ID } }],
  ])('skips a guess that holds no id and reads the next one (%s)', (_label, body) => {
    expect(extractCreatedId(body)).toBe(ID);
    expect(createdIdByGuesses(body)).toBe(ID);
  });

  it('reads the guesses in their documented order: the first that holds an id wins', () => {
    const body = { id: null, serviceId: 'second', data: { id: 'third' }, metadata: { id: 'fourth' } };
    expect(extractCreatedId(body)).toBe('second');
    expect(extractCreatedId({ ...body, serviceId: '' })).toBe('third');
    expect(extractCreatedId({ ...body, serviceId: '', data: { id: null } })).toBe('fourth');
    expect(extractCreatedId({ id: 'first', serviceId: null })).toBe('first');
    expect(extractCreatedId({ id: 7, serviceId: 'second' })).toBe('7');
  });

  it('is null when no guess holds an id', () => {
    expect(extractCreatedId({ id: null, serviceId: '', data: { id: {} }, metadata: null })).toBeNull();
    expect(extractCreatedId({ id: false, data: [{ id: 'x' }], metadata: 'm' })).toBeNull();
  });
});
