// A stream whose `initial` value is already terminal (`until`) ends there; asking it again, as graphql-sse does after
// the last value, must not start listening: a listener registered then would never be removed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { subscribers } from '../helpers/wait.js';

describe('an event stream that ends on its initial value', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway();
  });
  afterAll(() => gw?.close());

  it('holds no bus listener however often it is asked again', async () => {
    const { streams } = gw.gateway.services.events;
    const stream = streams.subscribe({ kind: 'test-kind', key: 'k-1', initial: 'done', until: () => true });
    expect(await stream.next()).toEqual({ done: false, value: 'done' });
    expect(await stream.next()).toEqual({ done: true, value: undefined });
    expect(await stream.next()).toEqual({ done: true, value: undefined });
    expect(subscribers(gw, 'test-kind', 'k-1')).toBe(0);
  });

  it('listens after an initial value that is not terminal, and stops at return()', async () => {
    const { streams } = gw.gateway.services.events;
    const stream = streams.subscribe({ kind: 'test-kind', key: 'k-2', initial: 'pending', until: () => false });
    expect(await stream.next()).toEqual({ done: false, value: 'pending' });
    expect(subscribers(gw, 'test-kind', 'k-2')).toBe(1);
    await stream.return(undefined);
    expect(subscribers(gw, 'test-kind', 'k-2')).toBe(0);
  });
});
