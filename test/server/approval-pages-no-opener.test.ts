import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

// The pages where a person approves an agent's plan, GET /approvals and GraphiQL's ?approvePlan= tab, are opened
// from links an agent hands out. A page that opened one (window.open) keeps a handle on its window unless the page
// says Cross-Origin-Opener-Policy: same-origin, and with it could later send that window to a look-alike sign-in
// page that asks the approver for their key again. Neither page may be framed by another site either.

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(async () => {
  await gw?.close();
});

async function headersOf(path: string, accept = 'text/html') {
  const res = await request(`${gw.url}${path}`, { headers: { accept } });
  await res.body.text();
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
  return res.headers;
}

describe('a page that opened an approval page cannot send it elsewhere, nor frame it', () => {
  it.each([
    ['the approvals page', '/approvals?plan=7d1c1f7e-2f0a-4f43-9a39-2ad0c3f2b1a4', "frame-ancestors 'none'"],
    ["GraphiQL's approval tab", '/graphql?approvePlan=7d1c1f7e-2f0a-4f43-9a39-2ad0c3f2b1a4', "frame-ancestors 'self'"],
  ])('%s: Cross-Origin-Opener-Policy same-origin, and no other site frames it', async (_what, path, frames) => {
    const headers = await headersOf(path);
    expect(headers['cross-origin-opener-policy']).toBe('same-origin');
    expect(String(headers['content-security-policy'])).toContain(frames);
  });
});
