import fs from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumUnavailableReason, launchChromium, recordRequests, replaceEditorText, type RequestLog } from '../helpers/browser.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const unavailable = chromiumUnavailableReason();
if (unavailable) console.warn(`skipping the GraphiQL browser test: ${unavailable}`);

const ARTIFACTS = path.resolve('test-artifacts');

/** The text of GraphiQL's result pane, with Monaco's non-breaking spaces made plain. */
async function responseText(page: Page): Promise<string> {
  return page.evaluate(() => (document.querySelector('.graphiql-response')?.textContent ?? '').replace(/\u00a0/g, ' '));
}

async function waitForResponse(page: Page, pattern: RegExp, timeout = 20_000): Promise<void> {
  await page.waitForFunction(
    (source) => new RegExp(source).test((document.querySelector('.graphiql-response')?.textContent ?? '').replace(/\u00a0/g, ' ')),
    pattern.source,
    { timeout },
  );
}

describe.skipIf(unavailable !== null)('GraphiQL in a browser, offline', () => {
  let gw: TestGateway;
  let browser: Browser;
  let page: Page;
  let requests: RequestLog;

  beforeAll(async () => {
    gw = await startTestGateway({ SANDBOX_CALLBACK_DELAY_MS: '50' });
    browser = (await launchChromium())!;
    page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    requests = recordRequests(page);
    await page.goto(`${gw.url}/graphql`);
    await page.waitForSelector('.graphiql-container', { timeout: 30_000 });
    await page.waitForSelector('.graphiql-query-editor .monaco-editor', { timeout: 30_000 });
  }, 90_000);

  afterAll(async () => {
    if (page) {
      fs.mkdirSync(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: path.join(ARTIFACTS, 'graphiql.png') }).catch(() => undefined);
    }
    await browser?.close();
    await gw?.close();
  });

  it('opens with the example operations as tabs', async () => {
    const tabs = (await page.locator('.graphiql-tab').allInnerTexts()).join(' | ');
    expect(tabs).toContain('ProvisionKafka');
    expect(tabs).toContain('WaitForMobileId');
    expect(tabs).toContain('CompleteMobileId');
  });

  it('runs a query and shows its result', async () => {
    await replaceEditorText(page, '.graphiql-query-editor .monaco-editor', '{ catalog { kafkaVersions { name wireValue } } }');
    await page.locator('.graphiql-execute-button').click();
    await waitForResponse(page, /"wireValue":\s*"3\.1\.0"/);
    expect(await responseText(page)).toContain('V2_8_1');
  });

  it('shows the schema descriptions in the docs pane', async () => {
    await page.locator('.graphiql-sidebar button').first().click();
    await page.waitForSelector('.graphiql-doc-explorer', { timeout: 15_000 });
    await page.locator('.graphiql-doc-explorer').getByText('Query', { exact: true }).first().click();
    await page.locator('.graphiql-doc-explorer').getByText('Projects the gateway created', { exact: false }).first().waitFor({ timeout: 15_000 });
    await page.locator('.graphiql-sidebar button').first().click();
  });

  it('streams a mobile-ID result into the result pane when the sandbox completes the authentication', async () => {
    const authReqId = `browser-${Date.now()}`;
    await replaceEditorText(
      page,
      '.graphiql-query-editor .monaco-editor',
      `subscription Wait { mobileIdAuthentication(authReqId: "${authReqId}") { __typename ... on MobileIdAuthenticated { authReqId subject } } }`,
    );
    await page.locator('.graphiql-execute-button').click();
    // The subscription is live once GraphiQL's execute button turns into a stop button.
    await page.waitForFunction(() => document.querySelector('.graphiql-execute-button')?.getAttribute('aria-label')?.toLowerCase().includes('stop'), null, {
      timeout: 15_000,
    });
    const trigger = await gw.graphql(`mutation($id: String!) { sandboxCompleteMobileIdAuthentication(authReqId: $id, outcome: SUCCESS) { httpStatus } }`, { id: authReqId });
    expect(trigger.data!.sandboxCompleteMobileIdAuthentication.httpStatus).toBe(204);
    await waitForResponse(page, new RegExp(`"authReqId":\\s*"${authReqId}"`));
    expect(await responseText(page)).toContain('MobileIdAuthenticated');
  });

  it('loaded nothing from outside this machine', () => {
    expect(requests.urls.length).toBeGreaterThan(3);
    expect(requests.nonLocal()).toEqual([]);
  });
});
