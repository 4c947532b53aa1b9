// deploy/kubernetes, checked here: both overlays render offline with `kubectl kustomize`, every object validates
// against the Kubernetes schemas of kubernetes-models, and the Deployment is read against the gateway's own routes,
// variables, shutdown and image (never against copies of them). Without kubectl, CI fails and a developer skips.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SHUTDOWN } from '../../src/gateway/options.js';
import { ENV_VARS, SECRET_VARS } from '../../src/config/index.js';
import { Metrics } from '../../src/metrics.js';
import { healthRoutes } from '../../src/server/health.js';
import type { Store } from '../../src/store/index.js';
import { argList, parseDockerfile } from '../helpers/dockerfile.js';
import { copyOfDeploy, kubernetesSuiteSkipReason, kustomize, type K8sObject, type Rendered } from '../helpers/kubectl.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const skip = kubernetesSuiteSkipReason('the Kubernetes deployment test (deploy/kubernetes)') !== null;

// What the gateway itself says: its health routes by name, its variables, and the command of its image.
const ROUTES = new Map(healthRoutes({ store: {} as Store, metrics: new Metrics(), circuits: () => ({}) }).map((r) => [r.name, r.path]));
const HEALTHZ = ROUTES.get('healthz')!;
const READYZ = ROUTES.get('readyz')!;
const VAR_NAMES = new Set(ENV_VARS.map((v) => v.name));
const DEFAULT_PORT = Number(ENV_VARS.find((v) => v.name === 'PORT')!.default);
const runtimeStage = parseDockerfile(fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8'), { isDir: () => false }).stages.at(-1)!;
const IMAGE_CMD = argList(runtimeStage.instructions.filter((i) => i.keyword === 'CMD').at(-1)!.args);

// The names the replicas overlay is given for the operator's Secrets (existing-secrets.env).
const DATABASE_SECRET = 'pg-gateway-credentials';
const KEY_SECRET = 'gateway-sealing-key';

/** The kubernetes-models class of an object, by its apiVersion and kind (undefined: no schema for it). */
async function modelOf(object: K8sObject): Promise<(new (data: unknown) => { validate(): void }) | undefined> {
  const modules: Record<string, () => Promise<Record<string, unknown>>> = {
    v1: () => import('kubernetes-models/v1'),
    'apps/v1': () => import('kubernetes-models/apps/v1'),
    'batch/v1': () => import('kubernetes-models/batch/v1'),
    'policy/v1': () => import('kubernetes-models/policy/v1'),
    'autoscaling/v2': () => import('kubernetes-models/autoscaling/v2'),
  };
  const load = modules[object.apiVersion];
  return load ? ((await load())[object.kind] as (new (data: unknown) => { validate(): void }) | undefined) : undefined;
}

function only(objects: K8sObject[], kind: string): K8sObject & Record<string, any> {
  const found = objects.filter((o) => o.kind === kind);
  expect(found.map((o) => o.metadata.name), `one ${kind}`).toHaveLength(1);
  return found[0]!;
}

/** The pod spec and the gateway's container of a rendered Deployment or Job. */
function podOf(workload: Record<string, any>, container: string): { pod: Record<string, any>; container: Record<string, any> } {
  const pod = workload.spec.template.spec;
  const found = (pod.containers as Array<Record<string, any>>).find((c) => c.name === container);
  expect(found, `container ${container}`).toBeDefined();
  return { pod, container: found! };
}

function envOf(container: Record<string, any>): Map<string, Record<string, any>> {
  return new Map(((container.env ?? []) as Array<Record<string, any>>).map((e) => [e.name as string, e]));
}

describe.skipIf(skip)('the Kubernetes deployment (deploy/kubernetes)', () => {
  let copy: ReturnType<typeof copyOfDeploy>;
  let single: Rendered;
  let replicas: Rendered;

  beforeAll(async () => {
    copy = copyOfDeploy();
    fs.rmSync(path.join(copy.dir, 'overlays/replicas/existing-secrets.env'), { force: true });
    fs.writeFileSync(path.join(copy.dir, 'overlays/replicas/existing-secrets.env'), `DATABASE_URL_SECRET=${DATABASE_SECRET}\nTOKEN_ENCRYPTION_KEY_SECRET=${KEY_SECRET}\n`);
    [single, replicas] = await Promise.all([kustomize(path.join(copy.dir, 'overlays/single')), kustomize(path.join(copy.dir, 'overlays/replicas'))]);
  }, 60_000);
  afterAll(() => copy?.remove());

  it('both overlays render offline with kubectl kustomize', () => {
    expect(single.code, single.stderr).toBe(0);
    expect(replicas.code, replicas.stderr).toBe(0);
    expect(single.objects.map((o) => o.kind).sort()).toEqual(['ConfigMap', 'Deployment', 'PersistentVolumeClaim', 'Service']);
    expect(replicas.objects.map((o) => o.kind).sort()).toEqual(['ConfigMap', 'ConfigMap', 'Deployment', 'HorizontalPodAutoscaler', 'Job', 'PodDisruptionBudget', 'Service']);
  });

  it('every rendered object validates against the Kubernetes schemas of kubernetes-models', async () => {
    for (const object of [...single.objects, ...replicas.objects]) {
      const Model = await modelOf(object);
      expect(Model, `a schema for ${object.apiVersion} ${object.kind}`).toBeDefined();
      expect(() => new Model!(object).validate(), `${object.kind} ${object.metadata.name}`).not.toThrow();
    }
    // The validator does refuse: the same Deployment with its port written as a word is invalid.
    const deployment = structuredClone(only(replicas.objects, 'Deployment'));
    deployment.spec.template.spec.containers[0].ports[0].containerPort = 'four thousand';
    const Model = await modelOf(deployment);
    expect(() => new Model!(deployment).validate()).toThrow(/containerPort/);
  });

  it("the Deployment's probes and scrape annotations use the gateway's own routes on the port it listens on", () => {
    for (const rendered of [single, replicas]) {
      const deployment = only(rendered.objects, 'Deployment');
      const { container } = podOf(deployment, 'gateway');
      const port = (container.ports as Array<Record<string, any>>).find((p) => p.name === 'http');
      const gatewayConfig = rendered.objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name.startsWith('gateway-config-')) as Record<string, any>;
      expect(port?.containerPort).toBe(Number(gatewayConfig.data.PORT ?? DEFAULT_PORT));
      expect(container.startupProbe.httpGet).toEqual({ path: READYZ, port: 'http' });
      expect(container.readinessProbe.httpGet).toEqual({ path: READYZ, port: 'http' });
      expect(container.livenessProbe.httpGet).toEqual({ path: HEALTHZ, port: 'http' });
      const annotations = deployment.spec.template.metadata.annotations as Record<string, string>;
      expect(annotations['prometheus.io/path']).toBe(ROUTES.get('metrics'));
      expect(Number(annotations['prometheus.io/port'])).toBe(port!.containerPort);
      const service = only(rendered.objects, 'Service');
      expect(service.spec.ports[0].targetPort).toBe('http');
      expect(service.spec.selector).toEqual(deployment.spec.selector.matchLabels);
    }
  });

  it("the preStop pause and the gateway's whole shutdown fit in the termination grace", () => {
    for (const rendered of [single, replicas]) {
      const { pod, container } = podOf(only(rendered.objects, 'Deployment'), 'gateway');
      const command = container.lifecycle.preStop.exec.command as string[];
      expect(command[0]).toBe('sleep');
      const pauseMs = Number(command[1]) * 1000;
      // Long enough for the endpoints to drop the pod before SIGTERM closes its WebSockets and SSE streams.
      expect(pauseMs).toBeGreaterThanOrEqual(5_000);
      // Then the gateway drains requests (SHUTDOWN.drainMs) and exits by SHUTDOWN.exitMs: Kubernetes must not kill it sooner.
      expect(SHUTDOWN.exitMs).toBeGreaterThan(SHUTDOWN.drainMs);
      expect(pod.terminationGracePeriodSeconds * 1000).toBeGreaterThan(pauseMs + SHUTDOWN.exitMs);
    }
  });

  it('the replicas overlay reads DATABASE_URL and TOKEN_ENCRYPTION_KEY from the named Secrets, and sets only variables the gateway declares', () => {
    const deployment = only(replicas.objects, 'Deployment');
    const { container } = podOf(deployment, 'gateway');
    const env = envOf(container);
    expect(env.get('DATABASE_URL')!.valueFrom).toEqual({ secretKeyRef: { name: DATABASE_SECRET, key: 'DATABASE_URL' } });
    expect(env.get('TOKEN_ENCRYPTION_KEY')!.valueFrom).toEqual({ secretKeyRef: { name: KEY_SECRET, key: 'TOKEN_ENCRYPTION_KEY' } });
    expect(env.get('DATABASE_MIGRATIONS')!.value).toBe('wait');
    for (const rendered of [single, replicas]) {
      const gatewayConfig = rendered.objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name.startsWith('gateway-config-')) as Record<string, any>;
      const { container: c } = podOf(only(rendered.objects, 'Deployment'), 'gateway');
      const set = [...envOf(c).keys(), ...Object.keys(gatewayConfig.data as object)];
      expect(set.filter((name) => !VAR_NAMES.has(name)), 'variables the gateway does not declare').toEqual([]);
      // A secret is never a plain value, in the ConfigMap or in the pod spec.
      expect(Object.keys(gatewayConfig.data as object).filter((name) => SECRET_VARS.has(name))).toEqual([]);
      expect([...envOf(c).values()].filter((e) => SECRET_VARS.has(e.name) && e.value !== undefined)).toEqual([]);
    }
  });

  it('the migration Job runs the image command with `migrate` against the same database Secret, and does not wait', () => {
    const job = only(replicas.objects, 'Job');
    const { container } = podOf(job, 'migrate');
    const deployment = podOf(only(replicas.objects, 'Deployment'), 'gateway').container;
    expect(container.command).toEqual([...IMAGE_CMD, 'migrate']);
    expect(container.image).toBe(deployment.image);
    expect(envOf(container).get('DATABASE_URL')!.valueFrom).toEqual(envOf(deployment).get('DATABASE_URL')!.valueFrom);
    expect(envOf(container).has('DATABASE_MIGRATIONS')).toBe(false);
    expect(job.spec.template.spec.restartPolicy).toBe('Never');
  });

  it('the replicas overlay: the autoscaler owns the count, a disruption budget and a spread over zones and nodes, and a rolling update that keeps every replica until the new one is ready', () => {
    const deployment = only(replicas.objects, 'Deployment');
    const labels = deployment.spec.template.metadata.labels as Record<string, string>;
    expect(deployment.spec.replicas).toBeUndefined();
    expect(deployment.spec.strategy).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } });
    const hpa = only(replicas.objects, 'HorizontalPodAutoscaler');
    expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: deployment.metadata.name });
    expect(hpa.spec.minReplicas).toBeGreaterThanOrEqual(2);
    const pdb = only(replicas.objects, 'PodDisruptionBudget');
    expect(Object.entries(pdb.spec.selector.matchLabels as object).every(([k, v]) => labels[k] === v)).toBe(true);
    expect(pdb.spec.maxUnavailable).toBe(1);
    const spread = deployment.spec.template.spec.topologySpreadConstraints as Array<Record<string, any>>;
    expect(spread.map((s) => s.topologyKey).sort()).toEqual(['kubernetes.io/hostname', 'topology.kubernetes.io/zone']);
    for (const s of spread) expect(Object.entries(s.labelSelector.matchLabels as object).every(([k, v]) => labels[k] === v)).toBe(true);
  });

  it('the single overlay runs one replica on SQLite, its DATA_DIR on a persistent volume, one pod at a time', () => {
    const deployment = only(single.objects, 'Deployment');
    const { pod, container } = podOf(deployment, 'gateway');
    expect(deployment.spec.replicas).toBe(1);
    expect(deployment.spec.strategy).toEqual({ type: 'Recreate' });
    expect(envOf(container).has('DATABASE_URL')).toBe(false);
    const gatewayConfig = single.objects.find((o) => o.kind === 'ConfigMap') as Record<string, any>;
    expect(gatewayConfig.data.DATABASE_URL).toBeUndefined();
    const dataDir = gatewayConfig.data.DATA_DIR as string;
    const mount = (container.volumeMounts as Array<Record<string, any>>).find((m) => m.mountPath === dataDir);
    const volume = (pod.volumes as Array<Record<string, any>>).find((v) => v.name === mount?.name);
    const claim = only(single.objects, 'PersistentVolumeClaim');
    expect(volume).toEqual({ name: mount!.name, persistentVolumeClaim: { claimName: claim.metadata.name } });
  });

  it('a change of the configuration rolls the pods: the pod template names a new ConfigMap', async () => {
    const before = only(single.objects, 'ConfigMap');
    const beforeRef = podOf(only(single.objects, 'Deployment'), 'gateway').container.envFrom[0].configMapRef.name;
    expect(beforeRef).toBe(before.metadata.name);
    fs.appendFileSync(path.join(copy.dir, 'base/gateway.env'), 'LOG_LEVEL=debug\n');
    try {
      const after = await kustomize(path.join(copy.dir, 'overlays/single'));
      expect(after.code, after.stderr).toBe(0);
      const changed = only(after.objects, 'ConfigMap');
      expect(changed.data.LOG_LEVEL).toBe('debug');
      expect(changed.metadata.name).not.toBe(before.metadata.name);
      expect(podOf(only(after.objects, 'Deployment'), 'gateway').container.envFrom[0].configMapRef.name).toBe(changed.metadata.name);
    } finally {
      fs.writeFileSync(path.join(copy.dir, 'base/gateway.env'), fs.readFileSync(path.join(ROOT, 'deploy/kubernetes/base/gateway.env')));
    }
  });

  it('the replicas overlay refuses to render until the Secrets of DATABASE_URL and TOKEN_ENCRYPTION_KEY are named', async () => {
    const file = path.join(copy.dir, 'overlays/replicas/existing-secrets.env');
    const saved = fs.readFileSync(file, 'utf8');
    try {
      fs.rmSync(file);
      const none = await kustomize(path.join(copy.dir, 'overlays/replicas'));
      expect(none.code).not.toBe(0);
      expect(none.stderr).toContain('existing-secrets.env');
      fs.writeFileSync(file, `TOKEN_ENCRYPTION_KEY_SECRET=${KEY_SECRET}\n`);
      const noDatabase = await kustomize(path.join(copy.dir, 'overlays/replicas'));
      expect(noDatabase.code).not.toBe(0);
      expect(noDatabase.stderr).toContain('DATABASE_URL_SECRET');
      fs.writeFileSync(file, `DATABASE_URL_SECRET=${DATABASE_SECRET}\n`);
      const noKey = await kustomize(path.join(copy.dir, 'overlays/replicas'));
      expect(noKey.code).not.toBe(0);
      expect(noKey.stderr).toContain('TOKEN_ENCRYPTION_KEY_SECRET');
    } finally {
      fs.writeFileSync(file, saved);
    }
    // The checkout carries only the example: the names are the operator's to give.
    expect(fs.existsSync(path.join(ROOT, 'deploy/kubernetes/overlays/replicas/existing-secrets.env.example'))).toBe(true);
  }, 60_000);
});
