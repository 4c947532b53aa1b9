import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { PROJECTS_PATH, SERVICES_PATH } from '../../src/sandbox/cloud.js';
import { M } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * The created id is read from documented guesses (`id`, `serviceId`, `data.id`, `metadata.id`; docs/graphql-api.md,
 * "Answers in shapes the specs do not show"), each on its own: a 2xx whose earlier guess holds no id (null, empty,
 * an object) and whose later guess holds it is a creation read as any other, never UPSTREAM_ANSWER_INCOMPLETE.
 */
describe('a cloud creation whose first guess of the created id holds no id', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ UPSTREAM_MAX_RETRIES: '0' });
  });
  afterAll(() => gw.close());
  afterEach(() => gw.gateway.sandbox.cloud!.faults.clear());

  const cloud = () => gw.gateway.sandbox.cloud!;
  /** The answer's own id (the sandbox's default shape carries it in `id`) moved by `move`. */
  const moved = (move: (id: string) => Record<string, unknown>) => ({
    alter: (body: unknown) => {
      const answer = body as Record<string, unknown>;
      return { ...answer, ...move(answer.id as string) };
    },
  });

  it('reads serviceId when id is null: the project is created, recorded and replayed', async () => {
    cloud().faults.enqueueFor(
      PROJECTS_PATH,
      moved((id) => ({ id: null, serviceId: id })),
    );
    const key = randomUUID();
    const res = await gw.graphql(M.project, { input: { name: 'id-in-serviceId' }, key });

    expect(res.errors).toBeUndefined();
    const created = cloud()
      .projects()
      .filter((p) => p.name === 'id-in-serviceId');
    expect(created).toHaveLength(1);
    expect(res.data!.createProject).toMatchObject({
      project: { id: created[0]!.id, name: 'id-in-serviceId' },
      idempotencyKey: key,
      replayed: false,
    });

    const read = await gw.graphql(`query($id: ID!) { project(id: $id) { id name } }`, { id: created[0]!.id });
    expect(read.data!.project).toEqual({ id: created[0]!.id, name: 'id-in-serviceId' });

    const retry = await gw.graphql(M.project, { input: { name: 'id-in-serviceId' }, key });
    expect(retry.errors).toBeUndefined();
    expect(retry.data!.createProject).toMatchObject({ project: { id: created[0]!.id }, replayed: true });
    expect(
      cloud()
        .projects()
        .filter((p) => p.name === 'id-in-serviceId'),
    ).toHaveLength(1);
  });

  it.each([
    ['id is empty, data.id holds it', (id: string) => ({ id: '', data: { id } })],
    ['id is an object, metadata.id holds it', (id: string) => ({ id: { value: 1 }, metadata: { id } })],
    ['serviceId is null, data.id holds it', (id: string) => ({ id: undefined, serviceId: null, data: { id } })],
  ])('reads the next guess of a network when %s', async (_label, move) => {
    const project = await gw.graphql(M.project, { input: { name: `for-network-${randomUUID()}` } });
    const projectId = project.data!.createProject.project.id as string;
    cloud().faults.enqueueFor(SERVICES_PATH, moved(move));
    const title = `net-${randomUUID().slice(0, 8)}`;
    const res = await gw.graphql(M.network, { input: { projectId, title, bandwidthMbps: 100 } });

    expect(res.errors).toBeUndefined();
    const created = cloud()
      .resources('network')
      .filter((r) => r.title === title);
    expect(created).toHaveLength(1);
    expect(res.data!.createNetwork).toMatchObject({
      network: { id: created[0]!.id, title, bandwidthMbps: 100 },
      replayed: false,
    });
  });
});
