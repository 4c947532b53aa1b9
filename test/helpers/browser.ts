// Headless Chromium for browser tests: Debian's chromium driven by playwright-core (which
// downloads no browser of its own). The gateway must work with no internet, so tests also
// record every request a page makes and check it stayed on loopback.
import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';

/** Override with CHROMIUM_PATH for a browser installed elsewhere. */
export const CHROMIUM_PATH = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';

/** No sandbox (tests run as root in containers) and nothing that phones home on start. */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
] as const;

/** Why Chromium cannot be launched here, with how to fix it; null when it can. */
export function chromiumUnavailableReason(): string | null {
  if (existsSync(CHROMIUM_PATH)) return null;
  return `Chromium not found at ${CHROMIUM_PATH}: install it with \`apt-get install chromium\` (Debian), or set CHROMIUM_PATH.`;
}

/** True when the `CI` variable is set (and not empty, "0" or "false"), as CI services set it. */
export function isCI(env: NodeJS.ProcessEnv = process.env): boolean {
  const ci = env['CI']?.trim().toLowerCase();
  return ci !== undefined && !['', '0', 'false'].includes(ci);
}

/**
 * For a browser test file, at load: null when Chromium can run. When it is missing, a developer's run skips the
 * suite (returns why, after saying so), but with `CI` set the file fails: CI must never pass without the browser.
 */
export function browserSuiteSkipReason(suite: string): string | null {
  const reason = chromiumUnavailableReason();
  if (reason === null) return null;
  if (isCI())
    throw new Error(
      `Cannot run ${suite}. ${reason} CI is set, so a missing Chromium fails the browser suite instead of skipping it.`,
    );
  console.warn(`Skipping ${suite}. ${reason} (With CI set, this fails instead.)`);
  return reason;
}

/** Launches headless Chromium, or returns null (printing how to install it) when it is missing. */
export async function launchChromium(): Promise<Browser | null> {
  const reason = chromiumUnavailableReason();
  if (reason !== null) {
    console.warn(reason);
    return null;
  }
  return chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: [...CHROMIUM_ARGS] });
}

/** True for URLs that stay on this machine: loopback hosts, or data:/blob:/about: URLs that need no network. */
export function isLocalUrl(url: string): boolean {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return false;
  }
  if (['data:', 'blob:', 'about:'].includes(parsed.protocol)) return true;
  if (!['http:', 'https:', 'ws:', 'wss:'].includes(parsed.protocol)) return false;
  const host = parsed.hostname;
  return host === 'localhost' || host === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

export interface RequestLog {
  /** Every URL the page requested (documents, scripts, workers, fetches) or opened a WebSocket to. */
  readonly urls: string[];
  /** The recorded URLs that would have left this machine. */
  nonLocal(): string[];
}

/** Starts recording a page's requests and WebSockets; call before navigating. */
export function recordRequests(page: Page): RequestLog {
  const urls: string[] = [];
  page.on('request', (request) => urls.push(request.url()));
  page.on('websocket', (socket) => urls.push(socket.url()));
  // Workers' own fetches are reported on the page's context in Chromium; record them too.
  page.on('worker', (worker) => urls.push(worker.url()));
  return { urls, nonLocal: () => urls.filter((url) => !isLocalUrl(url)) };
}
