// A newcomer's first ten minutes, in headless Chromium: GraphiQL served by the gateway itself, with the
// internet cut off, runs the example operations, documents the schema and streams a subscription.
import fs from 'node:fs';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { graphiqlExamples } from '../../src/server/graphiql-examples.js';
import {
  browserSuiteSkipReason,
  chromiumUnavailableReason,
  isLocalUrl,
  launchChromium,
  recordRequests,
  type RequestLog,
} from '../helpers/browser.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const unavailable = browserSuiteSkipReason('the GraphiQL browser test');

const ROOT = path.resolve(import.meta.dirname, '../..');
const SCREENSHOT = path.join(ROOT, 'test-artifacts', 'graphiql.png');

/** Generous: the CI machine has two cores and runs other test files beside this one. */
const WAIT = { timeout: 30_000 };

/** The auth_req_id the saved subscription and sandbox tabs share, read from the examples so the two cannot drift. */
const DEMO_AUTH_REQ_ID = (() => {
  const examples = graphiqlExamples({ sandbox: true });
  const ids = ['Wait for a mobile-ID result', 'Trigger the mobile-ID result (sandbox)'].map((title) => {
    const example = examples.find((e) => e.title === title);
    if (example === undefined) throw new Error(`GraphiQL example "${title}" is missing`);
    return /authReqId: "([^"]+)"/.exec(example.query)?.[1];
  });
  if (ids[0] === undefined || ids[0] !== ids[1])
    throw new Error(`the mobile-ID example tabs use different authReqIds: ${ids.join(', ')}`);
  return ids[0];
})();

/** Monaco renders spaces as U+00A0 and wraps long lines: make the text plain and one-spaced for matching. */
function plain(text: string): string {
  return text.replace(/\u00a0/g, ' ').replace(/\s+/g, ' ');
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** A JSON member as GraphiQL's result pane shows it, e.g. `"accepted": true`. */
function member(name: string, value: string | number | boolean): RegExp {
  return new RegExp(`"${escapeRegExp(name)}": ?${escapeRegExp(JSON.stringify(value))}`);
}

async function responseText(page: Page): Promise<string> {
  return plain(await page.locator('.graphiql-response').innerText());
}

/**
 * Waits until the result pane shows every pattern (match within one line of the pane: Monaco renders only
 * the lines in view, and their DOM order need not be the visual order), then returns its text. On timeout
 * the failure names the pattern missing and shows what the pane held.
 */
async function waitForResponse(page: Page, ...patterns: RegExp[]): Promise<string> {
  await page
    .waitForFunction(
      (sources) => {
        const pane = document.querySelector<HTMLElement>('.graphiql-response');
        const text = (pane?.innerText ?? '').replace(/\u00a0/g, ' ').replace(/\s+/g, ' ');
        return sources.every((source) => new RegExp(source).test(text));
      },
      patterns.map((p) => p.source),
      { ...WAIT, polling: 100 },
    )
    .catch(() => undefined);
  const text = await responseText(page);
  for (const pattern of patterns) expect(text, 'the GraphiQL result pane').toMatch(pattern);
  return text;
}

/** Switches to the saved tab whose operation is `operationName` and waits until it is the active one. */
async function openTab(page: Page, operationName: string): Promise<void> {
  await page.locator('.graphiql-tab-button', { hasText: new RegExp(`^${operationName}$`) }).click(WAIT);
  await page.locator('.graphiql-tab.graphiql-tab-active', { hasText: new RegExp(`^${operationName}`) }).waitFor(WAIT);
  await page.locator('.graphiql-query-editor', { hasText: operationName }).waitFor(WAIT);
}

async function execute(page: Page): Promise<void> {
  await page.locator('.graphiql-execute-button').click(WAIT);
}

/** Opens GraphiQL as a browser does (Accept prefers text/html) and waits for the editors and the saved tabs. */
async function openGraphiql(context: BrowserContext, url: string): Promise<{ page: Page; requests: RequestLog }> {
  const page = await context.newPage();
  const requests = recordRequests(page);
  const response = await page.goto(`${url}/graphql`, WAIT);
  expect(response?.headers()['content-type']).toMatch(/^text\/html/);
  await page.locator('.graphiql-query-editor .monaco-editor').waitFor(WAIT);
  await page.locator('.graphiql-tab-button').first().waitFor(WAIT);
  return { page, requests };
}

describe.skipIf(unavailable !== null)('GraphiQL in headless Chromium, with the internet cut off', () => {
  let gw: TestGateway;
  let browser: Browser | null = null;
  let context: BrowserContext;
  let page: Page;
  const requestLogs: RequestLog[] = [];
  /** Every graphql-ws message the pages sent or received, as text. */
  const wsFrames: { direction: 'sent' | 'received'; payload: string }[] = [];
  let screenshotTaken = false;

  beforeAll(async () => {
    gw = await startTestGateway();
    browser = await launchChromium();
    if (browser === null) throw new Error(`Chromium could not be launched: ${chromiumUnavailableReason()}`);
    context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    // Cut the internet off: anything not on loopback fails as if offline (and is still recorded below).
    await context.route(
      (url) => !isLocalUrl(url.href),
      (route) => route.abort('internetdisconnected'),
    );
    context.on('page', (p) =>
      p.on('websocket', (socket) => {
        socket.on('framesent', (frame) => wsFrames.push({ direction: 'sent', payload: String(frame.payload) }));
        socket.on('framereceived', (frame) => wsFrames.push({ direction: 'received', payload: String(frame.payload) }));
      }),
    );
    const opened = await openGraphiql(context, gw.url);
    page = opened.page;
    requestLogs.push(opened.requests);
  }, 90_000);

  afterAll(async () => {
    // A failed run leaves a picture of where it stopped.
    if (!screenshotTaken && page !== undefined) {
      fs.mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
      await page.screenshot({ path: SCREENSHOT }).catch(() => undefined);
    }
    await context?.close().catch(() => undefined);
    await browser?.close();
    await gw?.close();
  });

  it('opens with the main flows as saved tabs, the Kafka chain first', async () => {
    const tabs = await page.locator('.graphiql-tab-button').allInnerTexts();
    expect(tabs[0]).toBe('ProvisionKafka');
    expect(tabs).toEqual(
      expect.arrayContaining(['Projects', 'CreateIdentification', 'WaitForMobileId', 'CompleteMobileId']),
    );
    await expect
      .poll(() => page.locator('.graphiql-tab-active').innerText(), { timeout: 20_000 })
      .toMatch(/^ProvisionKafka/);
    await expect
      .poll(() => page.locator('[data-testid="gateway-logo"]').innerText(), { timeout: 20_000 })
      .toMatch(/sandbox/);
  });

  it('runs the Kafka chain from the first tab, then shows the new project in the Projects tab', async () => {
    await execute(page);
    const started = await waitForResponse(page, /"provisionKafkaCluster"/, member('replayed', false));
    const provisioningId = /"provisioning": ?\{ ?"id": ?"([0-9a-f-]{36})"/.exec(started)?.[1];
    expect(provisioningId, started).toBeDefined();

    // The chain runs in the background; wait (over HTTP) until its first step has created the project.
    let projectId: string | undefined;
    await expect
      .poll(
        async () => {
          const res = await gw.graphql<{ projects: { id: string; name: string }[] }>(
            '{ projects(first: 10) { id name } }',
          );
          projectId = res.data?.projects.find((p) => p.name === 'demo')?.id;
          return projectId;
        },
        { timeout: WAIT.timeout, interval: 200 },
      )
      .toBeDefined();

    await openTab(page, 'Projects');
    await execute(page);
    await waitForResponse(page, /"projects"/, member('id', projectId!), member('name', 'demo'));
  }, 90_000);

  it('documents the schema in the docs pane with the descriptions the schema carries', async () => {
    const res = await gw.graphql<{
      subscription: { fields: { name: string; description: string | null }[] };
      result: { description: string | null };
    }>(`{
      subscription: __type(name: "Subscription") { fields { name description } }
      result: __type(name: "MobileIdAuthenticationResult") { description }
    }`);
    const fieldDescription = res.data?.subscription.fields.find(
      (f) => f.name === 'mobileIdAuthentication',
    )?.description;
    const typeDescription = res.data?.result.description;
    expect(fieldDescription).toBeTruthy();
    expect(typeDescription).toBeTruthy();
    // Markdown renders `code` without its backticks; compare the first sentence as plain text.
    const firstSentence = (description: string) => plain(description.replace(/`/g, '')).split(/(?<=\.) /)[0]!;

    await page.locator('button[aria-label="Show Documentation Explorer"]').click(WAIT);
    const docs = page.locator('.graphiql-doc-explorer');
    await docs
      .locator('a.graphiql-doc-explorer-type-name', { hasText: /^Subscription$/ })
      .first()
      .click(WAIT);
    await docs
      .locator('a.graphiql-doc-explorer-field-name', { hasText: /^mobileIdAuthentication$/ })
      .first()
      .click(WAIT);
    await expect.poll(async () => plain(await docs.innerText()), WAIT).toContain(firstSentence(fieldDescription!));
    // Each entry point's scope, written at the end of its description (docs/decisions/046).
    await expect.poll(async () => plain(await docs.innerText()), WAIT).toContain('Requires the scope mobile-id:read.');

    // From the field to its type: the union's description and its two members.
    await docs
      .locator('.graphiql-doc-explorer-content a.graphiql-doc-explorer-type-name', {
        hasText: /^MobileIdAuthenticationResult$/,
      })
      .first()
      .click(WAIT);
    await docs.locator('.graphiql-doc-explorer-title', { hasText: /^MobileIdAuthenticationResult$/ }).waitFor(WAIT);
    const typePage = plain(await docs.innerText());
    expect(typePage).toContain(firstSentence(typeDescription!));
    expect(typePage).toMatch(/MobileIdAuthenticated\b/);
    expect(typePage).toMatch(/MobileIdAuthenticationFailed\b/);

    await page.locator('button[aria-label="Hide Documentation Explorer"]').click(WAIT);
    await docs.waitFor({ state: 'detached', ...WAIT });
  }, 60_000);

  it('streams the mobile-ID result into the subscription tab when the sandbox tab, open in a second browser tab, completes it', async () => {
    await openTab(page, 'WaitForMobileId');
    await execute(page);
    // Live: GraphiQL turns the execute button into a stop button, and the subscribe went over graphql-ws.
    await page.locator('.graphiql-execute-button[aria-label^="Stop"]').waitFor(WAIT);
    await expect
      .poll(
        () =>
          wsFrames.some(
            (f) =>
              f.direction === 'sent' &&
              /"type":"subscribe"/.test(f.payload) &&
              f.payload.includes(`mobileIdAuthentication(authReqId: \\"${DEMO_AUTH_REQ_ID}\\")`),
          ),
        WAIT,
      )
      .toBe(true);
    expect(await responseText(page)).not.toMatch(/MobileIdAuthenticat/);

    // Switching tabs in one GraphiQL stops its subscription, so the sandbox tab runs in a second browser tab.
    const second = await openGraphiql(context, gw.url);
    requestLogs.push(second.requests);
    await openTab(second.page, 'CompleteMobileId');
    await execute(second.page);
    await waitForResponse(
      second.page,
      member('authReqId', DEMO_AUTH_REQ_ID),
      member('httpStatus', 204),
      member('accepted', true),
    );

    const event = await waitForResponse(
      page,
      member('__typename', 'MobileIdAuthenticated'),
      member('authReqId', DEMO_AUTH_REQ_ID),
    );
    expect(event).toMatch(/"subject": ?"[^"]+"/);
    expect(
      wsFrames.some(
        (f) =>
          f.direction === 'received' &&
          /"type":"next"/.test(f.payload) &&
          f.payload.includes('"MobileIdAuthenticated"'),
      ),
    ).toBe(true);
    // An authentication ends once, so the stream completes and the button offers to run again.
    await page.locator('.graphiql-execute-button[aria-label^="Execute"]').waitFor(WAIT);

    await page.bringToFront();
    fs.mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT });
    screenshotTaken = true;
    expect(fs.readFileSync(SCREENSHOT).subarray(0, 8)).toEqual(
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    );
  }, 90_000);

  it("receives a subscription over Server-Sent Events in the browser's own EventSource (open gateway: EventSource sends no headers)", async () => {
    const authReqId = 'browser-event-source';
    const subscription = `subscription { mobileIdAuthentication(authReqId: "${authReqId}") { __typename ... on MobileIdAuthenticated { authReqId } } }`;
    const received = page.evaluate(
      (query) =>
        new Promise<{ events: { type: string; data: string }[]; error?: string }>((resolve) => {
          const events: { type: string; data: string }[] = [];
          const source = new EventSource(`/graphql/stream?query=${encodeURIComponent(query)}`);
          source.addEventListener('next', (e) => events.push({ type: 'next', data: (e as MessageEvent<string>).data }));
          // The server ends the stream after `complete`; EventSource would reconnect (and subscribe again) unless closed.
          source.addEventListener('complete', () => {
            source.close();
            resolve({ events });
          });
          source.onerror = () => {
            source.close();
            resolve({ events, error: 'the event stream failed' });
          };
        }),
      subscription,
    );
    const done = await gw.graphql(
      `mutation { sandboxCompleteMobileIdAuthentication(authReqId: "${authReqId}", outcome: SUCCESS) { accepted } }`,
    );
    expect(done.data?.sandboxCompleteMobileIdAuthentication.accepted).toBe(true);
    const { events, error } = await received;
    expect(error).toBeUndefined();
    // Each event carries its position in the durable log (decision 061), for a reconnect with Last-Event-ID.
    expect(events.map((e) => JSON.parse(e.data))).toEqual([
      {
        data: { mobileIdAuthentication: { __typename: 'MobileIdAuthenticated', authReqId } },
        extensions: { cursor: expect.any(String) },
      },
    ]);
    expect(requestLogs[0]!.urls).toEqual(expect.arrayContaining([expect.stringMatching(/\/graphql\/stream\?query=/)]));
  }, 60_000);

  it('loaded the page, its scripts, workers and WebSocket from 127.0.0.1 only', () => {
    const urls = requestLogs.flatMap((log) => log.urls);
    const origin = new URL(gw.url);
    expect(urls).toEqual(
      expect.arrayContaining([
        `${gw.url}/graphql`,
        expect.stringMatching(/\/graphql\/assets\/graphiql\.js/),
        `ws://${origin.host}/graphql`,
      ]),
    );
    expect(requestLogs.flatMap((log) => log.nonLocal())).toEqual([]);
  });
});

describe.skipIf(unavailable !== null)('GraphiQL at a gateway that requires a key', () => {
  it('sends the key typed into its "API key or JWT" field, remembers it on reload, and forgets it in a new browser session', async () => {
    const gw = await startTestGateway({ GATEWAY_API_KEYS: 'explorer:explorer-key-0123456789' });
    const browser = await launchChromium();
    if (browser === null) throw new Error(`Chromium could not be launched: ${chromiumUnavailableReason()}`);
    try {
      const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
      await context.route(
        (url) => !isLocalUrl(url.href),
        (route) => route.abort('internetdisconnected'),
      );
      const { page } = await openGraphiql(context, gw.url);
      await openTab(page, 'Projects');
      await execute(page);
      await waitForResponse(page, /UNAUTHENTICATED/);

      await page.getByTestId('gateway-credential').fill('explorer-key-0123456789');
      await execute(page);
      await waitForResponse(page, /"projects": ?\[/);

      await page.reload(WAIT);
      await page.locator('.graphiql-query-editor .monaco-editor').waitFor(WAIT);
      await expect
        .poll(() => page.getByTestId('gateway-credential').inputValue(), WAIT)
        .toBe('explorer-key-0123456789');
      await context.close();

      const fresh = await browser.newContext();
      const second = await openGraphiql(fresh, gw.url);
      expect(await second.page.getByTestId('gateway-credential').inputValue()).toBe('');
      await fresh.close();
    } finally {
      await browser.close();
      await gw.close();
    }
  }, 120_000);
});

describe.skipIf(unavailable !== null)(
  'GraphiQL keeps a key typed into its Headers editor out of the browser storage',
  () => {
    it('runs with the Authorization header of the Headers editor, and no key is left in localStorage', async () => {
      const key = 'headers-editor-key-0123456789';
      const gw = await startTestGateway({ GATEWAY_API_KEYS: `explorer:${key}` });
      const browser = await launchChromium();
      if (browser === null) throw new Error(`Chromium could not be launched: ${chromiumUnavailableReason()}`);
      try {
        const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
        await context.route(
          (url) => !isLocalUrl(url.href),
          (route) => route.abort('internetdisconnected'),
        );
        const { page } = await openGraphiql(context, gw.url);
        await openTab(page, 'Projects');
        // With a key required, the Headers editor is open below the query.
        const headers = page.locator('.graphiql-editor-tool .graphiql-editor:not(.hidden) .monaco-editor');
        await headers.click(WAIT);
        await page.keyboard.press('Control+A');
        await page.keyboard.press('Backspace');
        await page.keyboard.insertText(`{ "Authorization": "Bearer ${key}" }`);
        await execute(page);
        await waitForResponse(page, /"projects": ?\[/);
        // The history GraphiQL keeps is written as the operation ends: a second run makes sure it has been.
        await execute(page);
        await waitForResponse(page, /"projects": ?\[/);
        const stored = await page.evaluate(() =>
          Object.keys(localStorage).map((name) => `${name}=${localStorage.getItem(name) ?? ''}`),
        );
        expect(stored.join('\n')).toContain('graphiql:queries');
        expect(stored.filter((entry) => entry.includes(key))).toEqual([]);
        await context.close();
      } finally {
        await browser.close();
        await gw.close();
      }
    }, 120_000);
  },
);
