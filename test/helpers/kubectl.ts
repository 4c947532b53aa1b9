// kubectl for the tests of deploy/kubernetes: Debian's (kubernetes-client, installed by .ci/run) or any other on
// PATH, used offline only (`kubectl kustomize` renders files; it never talks to a cluster).
import { execFile } from 'node:child_process';
import { accessSync, constants, cpSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';

import { isCI } from './browser.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** The folder of the manifests in the checkout. */
export const DEPLOY_DIR = path.join(ROOT, 'deploy/kubernetes');

/** Debian's package of kubectl, which .ci/run installs. */
export const KUBECTL_PACKAGE = 'kubernetes-client';

/** Override with KUBECTL_PATH for a kubectl installed elsewhere (or, in a test, for none). */
const KUBECTL_PATH = process.env['KUBECTL_PATH'];

function executable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The kubectl to run: KUBECTL_PATH, or the first `kubectl` on PATH; null when there is none. */
export function findKubectl(): string | null {
  if (KUBECTL_PATH !== undefined) return executable(KUBECTL_PATH) ? KUBECTL_PATH : null;
  for (const dir of (process.env['PATH'] ?? '').split(path.delimiter).filter(Boolean)) {
    const file = path.join(dir, 'kubectl');
    if (executable(file)) return file;
  }
  return null;
}

/**
 * For the Kubernetes test file, at load: null when kubectl can run. When it is missing, a developer's run skips the
 * suite (returns why, after saying so), but with `CI` set the file fails: CI must never pass without rendering the
 * manifests (as the browser suite does without Chromium).
 */
export function kubernetesSuiteSkipReason(suite: string): string | null {
  if (findKubectl() !== null) return null;
  const where = KUBECTL_PATH !== undefined ? `at KUBECTL_PATH=${KUBECTL_PATH}` : 'on PATH';
  const reason = `kubectl not found ${where}: install it with \`apt-get install ${KUBECTL_PACKAGE}\` (Debian; .ci/run does), or set KUBECTL_PATH.`;
  if (isCI())
    throw new Error(
      `Cannot run ${suite}. ${reason} CI is set, so a missing kubectl fails the suite instead of skipping it.`,
    );
  console.warn(`Skipping ${suite}. ${reason} (With CI set, this fails instead.)`);
  return reason;
}

export interface Rendered {
  code: number;
  stderr: string;
  /** The rendered objects, in kustomize's order (empty when rendering failed). */
  objects: K8sObject[];
}

/** A rendered Kubernetes object, read loosely: tests look at the fields they name. */
export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  [field: string]: unknown;
}

/** `kubectl kustomize <dir>`, offline; resolves whether it succeeds or not. */
export function kustomize(dir: string): Promise<Rendered> {
  const kubectl = findKubectl();
  if (kubectl === null) throw new Error('kubectl not found');
  return new Promise((resolve) => {
    execFile(
      kubectl,
      ['kustomize', dir],
      { env: { PATH: process.env['PATH'] ?? '', HOME: os.tmpdir() } },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : 1;
        const objects =
          code === 0
            ? parseAllDocuments(stdout)
                .map((d) => d.toJS() as K8sObject)
                .filter((o) => o !== null)
            : [];
        resolve({ code, stderr, objects });
      },
    );
  });
}

/** A copy of deploy/kubernetes in a temporary folder, so a test can add or change files; `remove()` deletes it. */
export function copyOfDeploy(): { dir: string; remove(): void } {
  const base = mkdtempSync(path.join(os.tmpdir(), 'gateway-kubernetes-'));
  const dir = path.join(base, 'kubernetes');
  cpSync(DEPLOY_DIR, dir, { recursive: true });
  return { dir, remove: () => rmSync(base, { recursive: true, force: true }) };
}
