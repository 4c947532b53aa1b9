import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';

import { createChain, M, refusedBeforeTheWire, SSH_KEY, type Chain } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const NAME = 'must be one line of text without control characters; found';
const TEXT = 'must not contain control characters other than tab and line breaks; found';

/**
 * No text of a cloud input holds a C0 control character or DEL (the spec shows none, and PostgreSQL cannot store
 * U+0000, which every variable is refused with before this rule: test/execution/nul-character.test.ts); a name or title
 * is one line, free text (a description, a password) may hold tab and line breaks. Refused with BAD_USER_INPUT naming
 * the field, nothing sent, nothing stored.
 */
describe('control characters in cloud inputs', () => {
  let gw: TestGateway;
  let chain: Chain;
  beforeAll(async () => {
    gw = await startTestGateway();
    chain = await createChain(gw);
  });
  afterAll(() => gw.close());
  beforeEach(() => gw.gateway.sandbox.cloud!.clearRequests());

  it('an escape (U+001B) in a name, a title, a description, a topic name, an ACL pattern, a password and an SSH key', async () => {
    await refusedBeforeTheWire(gw, M.project, { name: 'shop\u001bx' }, 'input.name', `${NAME} U+001B at character 5`);
    await refusedBeforeTheWire(
      gw,
      M.project,
      { name: 'shop', description: 'a\u001b' },
      'input.description',
      `${TEXT} U+001B at character 2`,
    );
    await refusedBeforeTheWire(
      gw,
      M.network,
      { projectId: chain.projectId, title: '\u001b' },
      'input.title',
      `${NAME} U+001B at character 1`,
    );
    await refusedBeforeTheWire(
      gw,
      M.topic,
      { projectId: chain.projectId, clusterId: chain.clusterId, name: 'orders\u001b' },
      'input.name',
      `${NAME} U+001B at character 7`,
    );
    await refusedBeforeTheWire(
      gw,
      M.user,
      { projectId: chain.projectId, clusterId: chain.clusterId, name: 'u', password: 'p\u001bss' },
      'input.password',
      `${TEXT} U+001B at character 2`,
    );
    await refusedBeforeTheWire(
      gw,
      M.user,
      {
        projectId: chain.projectId,
        clusterId: chain.clusterId,
        name: 'u',
        password: 'pass',
        acls: [{ pattern: 'orders\u001b' }],
      },
      'input.acls[0].pattern',
      `${TEXT} U+001B at character 7`,
    );
    await refusedBeforeTheWire(
      gw,
      M.vm,
      {
        projectId: chain.projectId,
        title: 'vm',
        instanceType: 'C2_SMALL',
        bootDisk: { sizeGb: 10, image: 'DEBIAN_11' },
        users: [{ name: 'ops', sshKeys: [`${SSH_KEY}\u001b`] }],
        networkInterfaces: [{ networkId: chain.networkId, subnetId: chain.subnetId, ipAddressId: chain.ipId }],
      },
      'input.users[0].sshKeys[0]',
      `${TEXT} U+001B at character ${SSH_KEY.length + 1}`,
    );
  });

  it('other C0 controls and DEL anywhere, tab and line breaks inside a name; free text keeps them', async () => {
    await refusedBeforeTheWire(gw, M.project, { name: 'a\u001bb' }, 'input.name', `${NAME} U+001B at character 2`);
    await refusedBeforeTheWire(gw, M.project, { name: 'a\u007f' }, 'input.name', `${NAME} U+007F at character 2`);
    await refusedBeforeTheWire(gw, M.project, { name: 'web\nshop' }, 'input.name', `${NAME} U+000A at character 4`);
    await refusedBeforeTheWire(gw, M.project, { name: '  web\tshop' }, 'input.name', `${NAME} U+0009 at character 6`);
    await refusedBeforeTheWire(
      gw,
      M.project,
      { name: 'shop', description: 'bell\u0007' },
      'input.description',
      `${TEXT} U+0007 at character 5`,
    );
    // Free text still takes tab and line breaks, and whitespace around a name is trimmed as before.
    const res = await gw.graphql(M.project, {
      input: { name: '\tshop\n', description: 'line one\r\nline two\tend' },
      key: randomUUID(),
    });
    expect(res.errors).toBeUndefined();
    expect(res.data!.createProject.project).toMatchObject({ name: 'shop', description: 'line one\r\nline two\tend' });
  });

  it('in a composite provisioning, the field of the composite input, before anything is created', async () => {
    await refusedBeforeTheWire(
      gw,
      M.provisionKafka,
      {
        project: { name: 'fresh' },
        network: { title: 'net' },
        subnet: { title: 's', cidr: '10.9.0.0/24' },
        cluster: { title: 'kafka', instanceType: 'C2_MEDIUM' },
        topics: [{ name: 'orders' }, { name: 'pay\u001bments' }],
      },
      'input.topics[1].name',
      `${NAME} U+001B at character 4`,
    );
  });
});
