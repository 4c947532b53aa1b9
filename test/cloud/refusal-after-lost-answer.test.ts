import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import { M } from '../helpers/cloud.js';
import { gatewaysPerTest } from '../helpers/gateway.js';

const gateway = gatewaysPerTest();

const PROJECTS = '/apis/projects/public/v4/projects';

describe('a refusal after an attempt whose answer was lost', () => {
  it('keeps the key bound to its request: another input is IDEMPOTENCY_KEY_REUSED, the same one resumes', async () => {
    const gw = await gateway();
    const cloud = gw.gateway.sandbox.cloud!;
    const calls = () => cloud.requests.filter((r) => r.path === PROJECTS).length;
    // The first attempt creates the project and its answer is lost; the retry, under the same key, is refused (an
    // upstream that answers 409 while it still holds the key, say).
    cloud.faults.enqueueFor(PROJECTS, 'reset-after', { status: 409, body: { code: 'IN_PROGRESS' } });
    const key = randomUUID();
    const first = await gw.graphql(M.project, { input: { name: 'kept' }, key });
    expect(first.errors![0]!.extensions).toMatchObject({ code: 'UPSTREAM_REJECTED', status: 409 });
    expect(calls()).toBe(2);

    const other = await gw.graphql(M.project, { input: { name: 'another' }, key });
    expect(other.errors![0]!.extensions!.code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(calls()).toBe(2);

    const again = await gw.graphql(M.project, { input: { name: 'kept' }, key });
    expect(again.errors).toBeUndefined();
    expect(again.data!.createProject.project.name).toBe('kept');
    const listed = await gw.graphql('{ projects { id name } }');
    expect(listed.data!.projects).toEqual([{ id: again.data!.createProject.project.id, name: 'kept' }]);
  });
});
