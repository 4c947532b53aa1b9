// Spec, Errors: "error body shape: not shown". A refusal's message carries the upstream's own words wherever its body
// keeps them, so that the app reads why: a field that holds something else (a list of details, an error object) is not
// a reason to say nothing.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { M } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(() => gw.close());

describe("the words of a refusal whose body's shape the spec does not show", () => {
  it.each([
    ['a message beside a list of details', { message: 'the name is taken', details: [{ field: 'name' }] }],
    ['an error object holding the message', { error: { code: 'NAME_TAKEN', message: 'the name is taken' } }],
    ['an error string beside an empty message', { message: '', error: 'the name is taken' }],
  ])('are in the message: %s', async (_label, body) => {
    gw.gateway.sandbox.cloud!.faults.enqueueFor('/apis/projects/public/v4/projects', { status: 409, body });
    const res = await gw.graphql(M.project, { input: { name: 'taken' }, key: randomUUID() });
    expect(res.errors?.[0]?.extensions).toMatchObject({ code: 'UPSTREAM_REJECTED', status: 409, upstreamError: body });
    expect(res.errors?.[0]?.message).toBe('cloud rejected the request with status 409: the name is taken');
  });
});
