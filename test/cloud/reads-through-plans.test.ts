// Reads through a plan or a payload (docs/decisions/055): an app that may only write to the cloud (cloud:write) reads
// nothing that existed before its call through what a plan or a creation leads to (a REUSE step's `resource`, a
// provisioning's `project`, a created object's parent or children); those fields need cloud:read, worked out once per
// document like every other scope. Two apps over real HTTP, configured in GATEWAY_APPS_FILE.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { SSH_KEY } from '../helpers/cloud.js';
import { appsFile, startTestGateway, type TestGateway } from '../helpers/gateway.js';

const OWNER_KEY = 'owner-key-0123456789abcdef';
const WRITER_KEY = 'writer-key-0123456789abcdef';

const CREATE_PROJECT = `mutation { createProject(input: { name: "owner-secret-name", description: "owner's private description" }) { project { id } } }`;
const PLAN_VM = (selection: string) =>
  `query($input: ProvisionVirtualMachineInput!) { planVirtualMachine(input: $input) { valid errors { field message } steps { name action resourceId ${selection} } } }`;
const CREATE_NETWORK = (selection: string) =>
  `mutation($projectId: UUID!) { createNetwork(input: { projectId: $projectId, title: "writer-net" }) { network { id title ${selection} } } }`;

describe('reads through a plan or a payload need cloud:read', () => {
  let t: TestGateway;
  let projectId: string;
  const vmInput = () => ({
    projectId,
    network: { title: 'net' },
    subnet: { title: 'sub', cidr: '10.71.0.0/24' },
    ipAddress: { title: 'ip' },
    virtualMachine: {
      title: 'vm',
      instanceType: 'C2_MEDIUM',
      bootDisk: { sizeGb: 30, image: 'UBUNTU_22_04' },
      users: [{ name: 'ops', password: 'Reads-vm-secret-1', sshKeys: [SSH_KEY] }],
    },
  });

  beforeAll(async () => {
    const file = appsFile('apps-file-', [
      { name: 'owner', scopes: ['cloud:read', 'cloud:write'], key: OWNER_KEY },
      { name: 'writer', scopes: ['cloud:write'], key: WRITER_KEY },
    ]);
    t = await startTestGateway({ GATEWAY_APPS_FILE: file });
    const created = await t.graphql(CREATE_PROJECT, undefined, { key: OWNER_KEY });
    expect(created.errors).toBeUndefined();
    projectId = created.data!.createProject.project.id;
  });
  afterAll(() => t.close());

  it('a cloud:write app is refused a plan that selects a REUSE step’s resource, before anything runs, and reads no name or description', async () => {
    const res = await t.graphql(
      PLAN_VM('resource { id ... on Project { name description } }'),
      { input: vmInput() },
      { key: WRITER_KEY },
    );
    expect(res.status).toBe(403);
    expect(res.data).toBeUndefined();
    expect(res.errors![0]!.extensions).toMatchObject({
      code: 'FORBIDDEN',
      field: 'ProvisioningPlanStep.resource',
      scope: 'cloud:read',
    });
    expect(JSON.stringify(res)).not.toContain('owner-secret-name');
  });

  it('a cloud:write app still plans: the steps, their actions and the ids it gave', async () => {
    const res = await t.graphql(PLAN_VM(''), { input: vmInput() }, { key: WRITER_KEY });
    expect(res.errors).toBeUndefined();
    expect(res.data!.planVirtualMachine.errors).toEqual([]);
    expect(res.data!.planVirtualMachine.steps[0]).toEqual({ name: 'project', action: 'REUSE', resourceId: projectId });
  });

  it('an app with cloud:read reads a REUSE step’s resource', async () => {
    const res = await t.graphql(
      PLAN_VM('resource { id ... on Project { name } }'),
      { input: vmInput() },
      { key: OWNER_KEY },
    );
    expect(res.errors).toBeUndefined();
    expect(res.data!.planVirtualMachine.steps[0].resource).toEqual({ id: projectId, name: 'owner-secret-name' });
  });

  it('a cloud:write app creates, and reads its creation, but not the parent it names nor what that leads to', async () => {
    const own = await t.graphql(CREATE_NETWORK(''), { projectId }, { key: WRITER_KEY });
    expect(own.errors).toBeUndefined();
    expect(own.data!.createNetwork.network.title).toBe('writer-net');
    // Refused whole, before the creation: nothing was sent upstream for it.
    const through = await t.graphql(
      CREATE_NETWORK('project { name virtualMachines { users { name sshKeys } } }'),
      { projectId },
      { key: WRITER_KEY },
    );
    expect(through.status).toBe(403);
    expect(through.errors![0]!.extensions).toMatchObject({
      code: 'FORBIDDEN',
      field: 'Network.project',
      scope: 'cloud:read',
    });
    const networks = await t.graphql(
      `query($id: ID!) { project(id: $id) { networks { title } } }`,
      { id: projectId },
      { key: OWNER_KEY },
    );
    expect(networks.data!.project.networks.map((n: { title: string }) => n.title)).toEqual(['writer-net']);
  });

  it('a cloud:write app is refused a provisioning payload that selects a step’s resource or the project', async () => {
    const step = await t.graphql(
      `mutation($input: ProvisionVirtualMachineInput!) { provisionVirtualMachine(input: $input) { provisioning { id steps { resource { id } } } } }`,
      { input: vmInput() },
      { key: WRITER_KEY },
    );
    expect(step.errors![0]!.extensions).toMatchObject({
      code: 'FORBIDDEN',
      field: 'ProvisioningStep.resource',
      scope: 'cloud:read',
    });
    const project = await t.graphql(
      `mutation($input: ProvisionVirtualMachineInput!) { provisionVirtualMachine(input: $input) { provisioning { id project { name } } } }`,
      { input: vmInput() },
      { key: WRITER_KEY },
    );
    expect(project.errors![0]!.extensions).toMatchObject({
      code: 'FORBIDDEN',
      field: 'Provisioning.project',
      scope: 'cloud:read',
    });
  });
});
