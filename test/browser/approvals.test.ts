// The approvals page (GET /approvals) in headless Chromium, with the internet cut off: an approver signs in with the
// credential field, sees an agent's new plan appear without a reload, approves it with the keyboard (the agent's
// execute_plan then sends exactly one creation), declines another (nothing is sent), and an approver who may not
// approve that agent's plans never sees them; the page is usable at a phone's width; characters an agent's text could
// hide or reorder the requests with show as their escapes; Approve asks first, so a click the moving list put on
// another plan's button approves nothing, and an approval holds only for the status the person read. Under
// TRUSTED_DOCUMENTS=enforce it works the same, its documents being the gateway's own.
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  browserSuiteSkipReason,
  chromiumUnavailableReason,
  isLocalUrl,
  launchChromium,
  recordRequests,
  type RequestLog,
} from '../helpers/browser.js';
import { appsFile, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { manifestBeside, mcpClient, textOf, type TestMcpClient } from '../helpers/mcp.js';

const unavailable = browserSuiteSkipReason('the approvals page browser test');
const WAIT = { timeout: 30_000 };

const AGENT_KEY = 'agent-key-0123456789';
const APPROVER_KEY = 'approver-key-0123456789';
const ELSEWHERE_KEY = 'elsewhere-key-0123456789';
const SECOND_KEY = 'second-approver-key-0123456789';

const appsFileOf = () =>
  appsFile('approvals-page-', [
    { name: 'agent', scopes: ['cloud:read', 'cloud:write', 'identity:read', 'identity:write'], key: AGENT_KEY },
    { name: 'finance', scopes: ['cloud:approve', 'identity:approve'], key: APPROVER_KEY },
    { name: 'compliance', scopes: ['identity:approve'], key: SECOND_KEY },
    { name: 'elsewhere', scopes: ['cloud:approve'], approves: ['another-agent'], key: ELSEWHERE_KEY },
  ]);

describe.skipIf(unavailable !== null)('the approvals page in headless Chromium, with the internet cut off', () => {
  let gw: TestGateway;
  let browser: Browser;
  let agent: TestMcpClient;
  const logs: RequestLog[] = [];

  async function open(
    key: string,
    viewport: { width: number; height: number },
    at = `${gw.url}/approvals`,
  ): Promise<Page> {
    const context: BrowserContext = await browser.newContext({ viewport });
    await context.route(
      (url) => !isLocalUrl(url.href),
      (route) => route.abort('internetdisconnected'),
    );
    const page = await context.newPage();
    logs.push(recordRequests(page));
    await page.goto(at);
    await page.getByText(/Sign in with your key or token: it must hold cloud:approve/).waitFor(WAIT);
    const field = page.getByLabel('Your key or token');
    await field.focus();
    await page.keyboard.type(key);
    await page.keyboard.press('Enter');
    await page.getByText('Signed in. The list updates by itself.').waitFor(WAIT);
    return page;
  }

  const creations = () =>
    gw.gateway.sandbox.cloud!.requests.filter((r) => r.method === 'POST' && !r.path.startsWith('/iam'));

  beforeAll(async () => {
    gw = await startTestGateway({ GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve' });
    const launched = await launchChromium();
    if (launched === null) throw new Error(`Chromium could not be launched: ${chromiumUnavailableReason()}`);
    browser = launched;
    agent = await mcpClient(gw, { key: AGENT_KEY });
  }, 90_000);

  afterAll(async () => {
    await agent?.close().catch(() => undefined);
    await browser?.close();
    await gw?.close();
  });

  it('without a credential, or with one that cannot approve, it shows the sign-in field and why', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const res = await page.goto(`${gw.url}/approvals`);
    expect(res!.status()).toBe(200);
    await page.getByText(/Sign in with your key or token/).waitFor(WAIT);
    await page.getByLabel('Your key or token').fill(AGENT_KEY);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText(/This key or token cannot approve plans/).waitFor(WAIT);
    expect(await page.getByLabel('Your key or token').isVisible()).toBe(true);
    await context.close();
  });

  it('approve from the page: the plan appears live, and execute_plan then sends exactly one creation', async () => {
    const page = await open(APPROVER_KEY, { width: 1200, height: 900 });
    const elsewhere = await open(ELSEWHERE_KEY, { width: 1200, height: 900 });
    // The person works in this page: it is in front.
    await page.bringToFront();
    await page.getByText('No plan waits for your approval.').waitFor(WAIT);

    const planned = await agent.call('create_project', { input: { name: 'from-the-page' } });
    expect(planned.isError, textOf(planned)).toBeFalsy();
    const planId = planned.structuredContent!.planId as string;
    const card = page.locator(`article[data-plan-id="${planId}"]`);
    await card.waitFor(WAIT);
    await expect.poll(() => card.textContent(), { timeout: 20_000 }).toContain('agent asks to run create_project');
    await card.getByText('The exact requests and the hash').click();
    await card.getByText(planned.structuredContent!.hash as string).waitFor(WAIT);
    expect(await card.locator('pre').textContent()).toContain('"authorization"');

    // Keyboard: focus Approve and press Enter; the page asks, naming the plan, with Cancel focused: Tab, Enter.
    await card.getByRole('button', { name: 'Approve' }).focus();
    await page.keyboard.press('Enter');
    const asked = page.getByRole('dialog');
    await asked.getByText(planned.structuredContent!.hash as string).waitFor(WAIT);
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await page.getByText('The plan of agent is approved.').waitFor(WAIT);
    await card.waitFor({ state: 'detached', ...WAIT });

    const executed = await agent.call('execute_plan', { planId });
    expect(executed.isError, textOf(executed)).toBeFalsy();
    expect(creations()).toHaveLength(1);
    expect(await elsewhere.locator(`article[data-plan-id="${planId}"]`).count()).toBe(0);
  });

  it('decline from the page: the agent hears it was declined and nothing is sent; another approver never lists it', async () => {
    const page = await open(APPROVER_KEY, { width: 375, height: 740 });
    const elsewhere = await open(ELSEWHERE_KEY, { width: 1200, height: 900 });
    await page.bringToFront();
    const before = creations().length;
    const planned = await agent.call('create_project', { input: { name: 'declined-on-the-page' } });
    const planId = planned.structuredContent!.planId as string;
    const card = page.locator(`article[data-plan-id="${planId}"]`);
    await card.waitFor(WAIT);
    // A phone's width: nothing scrolls sideways.
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(375);
    await card.getByRole('button', { name: 'Decline' }).click();
    await page.getByText('The plan of agent is declined.').waitFor(WAIT);
    await card.waitFor({ state: 'detached', ...WAIT });

    const refused = await agent.call('execute_plan', { planId });
    expect(refused.structuredContent).toMatchObject({ code: 'DECLINED', status: 'DECLINED' });
    expect(creations()).toHaveLength(before);
    // The other approver's page, woken by the same changes, never showed the plan.
    await elsewhere.bringToFront();
    await elsewhere.getByText('No plan waits for your approval.').waitFor(WAIT);
    expect(await elsewhere.locator('article').count()).toBe(0);

    for (const log of logs) expect(log.nonLocal()).toEqual([]);
  });

  it("an agent's hidden characters (a bidi override, zero-width ones, separators) show as escapes in the requests", async () => {
    const page = await open(APPROVER_KEY, { width: 1200, height: 900 });
    const name = 'web\u202e1-bd-dorp\u2028- nothing else\u200b\u2060\ufe0f\u{e0041}\u2029x';
    const planned = await agent.call('create_project', { input: { name } });
    expect(planned.isError, textOf(planned)).toBeFalsy();
    const card = page.locator(`article[data-plan-id="${planned.structuredContent!.planId as string}"]`);
    await card.waitFor(WAIT);
    await card.getByText('The exact requests and the hash').click();
    const shown = (await card.textContent())!;
    expect(shown).toContain('web\\u202e1-bd-dorp\\u2028- nothing else\\u200b\\u2060\\ufe0f\\udb40\\udc41\\u2029x');
    for (const line of shown.split('\n'))
      expect(line).not.toMatch(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}]/u);
    await page.context().close();
    const declined = await gw.graphql(
      'mutation($id: ID!) { declinePlan(planId: $id) { status } }',
      { id: planned.structuredContent!.planId },
      { key: APPROVER_KEY },
    );
    expect(declined.data).toEqual({ declinePlan: { status: 'DECLINED' } });
  });

  it('a plan that arrives while the person aims at Approve is never approved by that click: the page asks first', async () => {
    const page = await open(APPROVER_KEY, { width: 1200, height: 900 });
    const aimed = await agent.call('create_project', { input: { name: 'aimed-at' } });
    expect(aimed.isError, textOf(aimed)).toBeFalsy();
    const aimedId = aimed.structuredContent!.planId as string;
    const card = page.locator(`article[data-plan-id="${aimedId}"]`);
    await card.waitFor(WAIT);
    const box = (await card.getByRole('button', { name: 'Approve' }).boundingBox())!;
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    // The agent plans again just as the person clicks: the new card comes in and the list moves under the pointer.
    const slipped = await agent.call('create_project', { input: { name: 'slipped-in' } });
    expect(slipped.isError, textOf(slipped)).toBeFalsy();
    const slippedId = slipped.structuredContent!.planId as string;
    await page.locator(`article[data-plan-id="${slippedId}"]`).waitFor(WAIT);
    await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
    const asked = page.getByRole('dialog');
    const approved = page.getByText(/ is approved\./);
    await asked.or(approved).waitFor(WAIT);
    expect(await approved.count()).toBe(0);
    // The question names the plan the click was on, with its requests, before anything is approved.
    const clicked = (await asked.textContent())!.includes(slippedId) ? slipped : aimed;
    expect(await asked.textContent()).toContain(clicked.structuredContent!.summary as string);
    expect(await asked.textContent()).toContain(clicked.structuredContent!.hash as string);
    await asked.getByRole('button', { name: 'Cancel' }).click();
    await asked.waitFor({ state: 'hidden', ...WAIT });
    for (const id of [aimedId, slippedId]) {
      const plan = await gw.graphql('query($id: ID!) { agentPlan(id: $id) { status } }', { id }, { key: APPROVER_KEY });
      expect(plan.data).toEqual({ agentPlan: { status: 'PENDING' } });
      await gw.graphql('mutation($id: ID!) { declinePlan(planId: $id) { status } }', { id }, { key: APPROVER_KEY });
    }
    await page.context().close();
  });

  it('a plan whose run ended unknown while the person read it as pending is not approved to run again', async () => {
    const page = await open(APPROVER_KEY, { width: 1200, height: 900 });
    const planned = await agent.call('create_identification', { input: { workflowId: 'wf-read-as-pending' } });
    expect(planned.isError, textOf(planned)).toBeFalsy();
    const planId = planned.structuredContent!.planId as string;
    const card = page.locator(`article[data-plan-id="${planId}"]`);
    await card.waitFor(WAIT);
    await card.getByRole('button', { name: 'Approve' }).click();
    const asked = page.getByRole('dialog');
    await asked.getByText(planned.structuredContent!.hash as string).waitFor(WAIT);
    // Meanwhile another approver approves it, and its run ends unknown: the identification may have been created,
    // and only a person who knows that approves sending it again.
    const approve = 'mutation($id: ID!) { approvePlan(planId: $id) { status } }';
    expect((await gw.graphql(approve, { id: planId }, { key: SECOND_KEY })).data).toEqual({
      approvePlan: { status: 'APPROVED' },
    });
    const identification = gw.gateway.sandbox.identification!;
    identification.faults.enqueueFor(() => true, 'reset-after');
    const first = await agent.call('execute_plan', { planId });
    identification.faults.clear();
    expect(first.structuredContent).toMatchObject({
      status: 'UNKNOWN',
      errors: [{ code: 'UPSTREAM_OUTCOME_UNKNOWN' }],
    });
    // The person confirms what they read: a pending plan's first run.
    await asked.getByRole('button', { name: 'Approve this plan' }).click();
    await page.getByText(/^(Not done|The plan of agent is)/).waitFor(WAIT);
    expect(await page.locator('#status').textContent()).toMatch(/^Not done: .* is UNKNOWN now, not PENDING as shown/);
    // Listed again as unknown, its card says what a second approval risks: an identity check is made again.
    await card.getByText(/an identity check may be made a second time: check the identity service first/).waitFor(WAIT);
    const again = await agent.call('execute_plan', { planId });
    expect(again.structuredContent).toMatchObject({ status: 'UNKNOWN', code: 'APPROVAL_REQUIRED' });
    expect(identification.requests.filter((r) => r.method === 'POST')).toHaveLength(1);
    await page.context().close();
  });

  it('the question before approving a plan whose run ended unknown says it runs again, and what that risks', async () => {
    const planned = await agent.call('create_identification', { input: { workflowId: 'wf-asked-again' } });
    expect(planned.isError, textOf(planned)).toBeFalsy();
    const planId = planned.structuredContent!.planId as string;
    const approve = 'mutation($id: ID!) { approvePlan(planId: $id) { status } }';
    expect((await gw.graphql(approve, { id: planId }, { key: SECOND_KEY })).data).toEqual({
      approvePlan: { status: 'APPROVED' },
    });
    const identification = gw.gateway.sandbox.identification!;
    identification.faults.enqueueFor(() => true, 'reset-after');
    const first = await agent.call('execute_plan', { planId });
    identification.faults.clear();
    expect(first.structuredContent).toMatchObject({ status: 'UNKNOWN' });
    const sent = identification.requests.filter((r) => r.method === 'POST').length;

    // A click that lands on this card (the list moved under the pointer) asks the person about this plan: the
    // question itself says that approving sends it again, since its summary reads as a pending plan's.
    const page = await open(APPROVER_KEY, { width: 1200, height: 900 });
    const card = page.locator(`article[data-plan-id="${planId}"]`);
    await card.getByRole('button', { name: 'Approve' }).click(WAIT);
    const asked = page.getByRole('dialog');
    await asked.getByText(planned.structuredContent!.hash as string).waitFor(WAIT);
    expect(await asked.getByRole('heading').textContent()).toMatch(/ again\?$/);
    expect(await asked.textContent()).toMatch(
      /an identity check may be made a second time: check the identity service/,
    );
    await asked.getByRole('button', { name: 'Cancel' }).click();
    await asked.waitFor({ state: 'hidden', ...WAIT });

    // The question of a pending plan says nothing of the kind.
    const pending = await agent.call('create_project', { input: { name: 'asked-once' } });
    expect(pending.isError, textOf(pending)).toBeFalsy();
    const pendingId = pending.structuredContent!.planId as string;
    await page.locator(`article[data-plan-id="${pendingId}"]`).getByRole('button', { name: 'Approve' }).click(WAIT);
    await asked.getByText(pending.structuredContent!.hash as string).waitFor(WAIT);
    expect(await asked.getByRole('heading').textContent()).not.toMatch(/again/);
    expect(await asked.textContent()).not.toMatch(/unknown/);
    await asked.getByRole('button', { name: 'Cancel' }).click();
    await page.context().close();

    const plan = await gw.graphql(
      'query($id: ID!) { agentPlan(id: $id) { status } }',
      { id: planId },
      { key: APPROVER_KEY },
    );
    expect(plan.data).toEqual({ agentPlan: { status: 'UNKNOWN' } });
    expect(identification.requests.filter((r) => r.method === 'POST')).toHaveLength(sent);
    await gw.graphql(
      'mutation($id: ID!) { declinePlan(planId: $id) { status } }',
      { id: pendingId },
      { key: APPROVER_KEY },
    );
  });

  it('an approval the network loses says so, and leaves the plan as it was', async () => {
    const page = await open(APPROVER_KEY, { width: 1200, height: 900 });
    // The approval's request never reaches the gateway (a dropped connection): the other requests go through.
    await page.route(`${gw.url}/graphql`, (route) =>
      (route.request().postData() ?? '').includes('approvePlan') ? route.abort('connectionreset') : route.continue(),
    );
    const planned = await agent.call('create_project', { input: { name: 'lost-on-the-way' } });
    expect(planned.isError, textOf(planned)).toBeFalsy();
    const planId = planned.structuredContent!.planId as string;
    const card = page.locator(`article[data-plan-id="${planId}"]`);
    await card.getByRole('button', { name: 'Approve' }).click(WAIT);
    await page.getByRole('dialog').getByRole('button', { name: 'Approve this plan' }).click(WAIT);
    await page.getByText(/^Not done: the gateway could not be reached or did not answer/).waitFor(WAIT);
    const plan = await gw.graphql(
      'query($id: ID!) { agentPlan(id: $id) { status } }',
      { id: planId },
      { key: APPROVER_KEY },
    );
    expect(plan.data).toEqual({ agentPlan: { status: 'PENDING' } });
    await gw.graphql(
      'mutation($id: ID!) { declinePlan(planId: $id) { status } }',
      { id: planId },
      { key: APPROVER_KEY },
    );
    await page.context().close();
  });

  it('a refusal of the list that is not about the credential keeps the person signed in, and the list comes back', async () => {
    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    // The gateway's first answer to the list is replaced by a rate limit's refusal; every later message goes through.
    let refusedOnce = false;
    await context.routeWebSocket(/\/graphql$/, (ws) => {
      const server = ws.connectToServer();
      ws.onMessage((message) => server.send(message));
      server.onMessage((message) => {
        const text = String(message);
        if (!refusedOnce && text.includes('"type":"next"') && text.includes('"id":"plans"')) {
          refusedOnce = true;
          ws.send(
            JSON.stringify({
              id: 'plans',
              type: 'error',
              payload: [{ message: 'too many requests', extensions: { code: 'RATE_LIMITED', retryAfter: 1 } }],
            }),
          );
          return;
        }
        ws.send(message);
      });
    });
    const page = await context.newPage();
    await page.goto(`${gw.url}/approvals`);
    await page.getByLabel('Your key or token').fill(APPROVER_KEY);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('The list could not be read (too many requests); trying again…').waitFor(WAIT);
    expect(await page.getByText(/cannot approve plans/).count()).toBe(0);
    await page.getByText('Signed in. The list updates by itself.').waitFor(WAIT);
    expect(await page.getByText(/cannot approve plans/).count()).toBe(0);
    expect(refusedOnce).toBe(true);
    await context.close();
  });

  it("a link's ?plan= that is no plan id is not shown as the page's own words", async () => {
    const page = await open(APPROVER_KEY, { width: 1200, height: 900 });
    const words = 'the security team checked these plans: approve every plan of agent now. Plan 1';
    await page.goto(`${gw.url}/approvals?plan=${encodeURIComponent(words)}`);
    await page.locator('#focus p').waitFor(WAIT);
    expect(await page.locator('#focus').textContent()).toBe('This link names no plan (a plan id is a UUID).');
    await page.context().close();
  });

  it('a link naming the plan in upper case opens that plan: it is marked in the list, and said once', async () => {
    const planned = await agent.call('create_project', { input: { name: 'upper-case-link' } });
    expect(planned.isError, textOf(planned)).toBeFalsy();
    const planId = planned.structuredContent!.planId as string;
    const context = await browser.newContext();
    await context.route(
      (url) => !isLocalUrl(url.href),
      (route) => route.abort('internetdisconnected'),
    );
    const page = await context.newPage();
    logs.push(recordRequests(page));
    await page.goto(`${gw.url}/approvals?plan=${planId.toUpperCase()}`);
    await page.getByLabel('Your key or token').fill(APPROVER_KEY);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator(`#plans article.focus[data-plan-id="${planId}"]`).waitFor(WAIT);
    await page.locator('#focus article').waitFor({ state: 'detached', ...WAIT });
    expect(await page.locator('#focus').textContent()).toBe('');
    expect(await page.locator(`article[data-plan-id="${planId}"]`).count()).toBe(1);
    await context.close();
    const declined = await gw.graphql(
      'mutation($id: ID!) { declinePlan(planId: $id) { status } }',
      { id: planId },
      { key: APPROVER_KEY },
    );
    expect(declined.data).toEqual({ declinePlan: { status: 'DECLINED' } });
  });

  it("an agent's markup and javascript: values are shown as text, never run or made into elements or links", async () => {
    const page = await open(APPROVER_KEY, { width: 1200, height: 900 });
    const name = '<img src=x onerror="window.__injected=1">';
    const description = '"><script>window.__injected=2</script>';
    const workflowId = 'javascript:window.__injected=3';
    const project = await agent.call('create_project', { input: { name, description } });
    expect(project.isError, textOf(project)).toBeFalsy();
    const identity = await agent.call('register_verification', {
      input: { workflowId, applicant: { firstName: '<b onmouseover="window.__injected=4">x</b>' } },
    });
    expect(identity.isError, textOf(identity)).toBeFalsy();
    const ids = [project, identity].map((p) => p.structuredContent!.planId as string);
    for (const id of ids) {
      const card = page.locator(`article[data-plan-id="${id}"]`);
      await card.waitFor(WAIT);
      await card.getByText('The exact requests and the hash').click();
      await card.hover();
    }
    const projectCard = page.locator(`article[data-plan-id="${ids[0]}"]`);
    const identityCard = page.locator(`article[data-plan-id="${ids[1]}"]`);
    // The values read literally, as JSON of the exact requests.
    expect(await projectCard.locator('pre').textContent()).toContain(JSON.stringify(name));
    expect(await projectCard.locator('pre').textContent()).toContain(JSON.stringify(description));
    expect(await identityCard.locator('pre').textContent()).toContain(JSON.stringify(workflowId));
    expect(await identityCard.locator('pre').textContent()).toContain('\\"window.__injected=4\\"');
    // The confirmation dialog too reads them as text.
    await projectCard.getByRole('button', { name: 'Approve' }).click();
    const asked = page.getByRole('dialog');
    await asked.getByText(project.structuredContent!.hash as string).waitFor(WAIT);
    expect(await asked.textContent()).toContain(JSON.stringify(name));
    await asked.getByRole('button', { name: 'Cancel' }).click();
    // Nothing of the agent's became an element, a link or a handler, and no script of theirs ran.
    const made = await page.evaluate(() => ({
      injected: (window as unknown as { __injected?: unknown }).__injected ?? null,
      elements: document.querySelectorAll('main img, main script, main b, main a, main iframe, dialog img').length,
      scripts: Array.from(document.scripts).map((s) => s.getAttribute('src')),
      handlers: Array.from(document.querySelectorAll('*')).filter((el) =>
        Array.from(el.attributes).some((a) => /^on/i.test(a.name)),
      ).length,
    }));
    expect(made).toEqual({ injected: null, elements: 0, scripts: ['/approvals/app.js'], handlers: 0 });
    await page.context().close();
    for (const id of ids) {
      const declined = await gw.graphql(
        'mutation($id: ID!) { declinePlan(planId: $id) { status } }',
        { id },
        { key: APPROVER_KEY },
      );
      expect(declined.data).toEqual({ declinePlan: { status: 'DECLINED' } });
    }
  });

  it('works under TRUSTED_DOCUMENTS=enforce: lists, approves and opens a plan, with nothing in the manifest', async () => {
    const { env } = manifestBeside(appsFileOf(), {
      'create-project':
        'mutation CreateProject($input: CreateProjectInput!) { createProject(input: $input) { project { id } } }',
    });
    const enforced = await startTestGateway({ ...env, TRUSTED_DOCUMENTS: 'enforce', MCP_MUTATIONS: 'approve' });
    const enforcedAgent = await mcpClient(enforced, { key: AGENT_KEY });
    try {
      const planned = await enforcedAgent.call('CreateProject', { input: { name: 'approved-under-enforce' } });
      expect(planned.isError, textOf(planned)).toBeFalsy();
      const planId = planned.structuredContent!.planId as string;
      // Opened from the agent's link: the live list shows the plan, marked.
      const page = await open(APPROVER_KEY, { width: 1200, height: 900 }, `${enforced.url}/approvals?plan=${planId}`);
      const card = page.locator(`#plans article[data-plan-id="${planId}"]`);
      await card.waitFor(WAIT);
      await card.getByRole('button', { name: 'Approve' }).click();
      const asked = page.getByRole('dialog');
      await asked.getByText(planned.structuredContent!.hash as string).waitFor(WAIT);
      await asked.getByRole('button', { name: 'Approve this plan' }).click();
      await page.getByText('The plan of agent is approved.').waitFor(WAIT);
      await card.waitFor({ state: 'detached', ...WAIT });
      const executed = await enforcedAgent.call('execute_plan', { planId });
      expect(executed.structuredContent, textOf(executed)).toMatchObject({ planId, status: 'SUCCEEDED' });
      expect(
        enforced.gateway.sandbox.cloud!.requests.filter((r) => r.method === 'POST' && !r.path.startsWith('/iam')),
      ).toHaveLength(1);
      // The link opened again: the plan, no longer listed, is read (agentPlan) and shown above the list as it is now.
      await page.reload();
      const opened = page.locator(`#focus article[data-plan-id="${planId}"]`);
      await opened.getByText('This plan is succeeded.').waitFor(WAIT);
      await page.context().close();
    } finally {
      await enforcedAgent.close().catch(() => undefined);
      await enforced.close();
    }
  });
});
