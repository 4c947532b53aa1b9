import { SANDBOX_SERVICE_ACCOUNT_TOKEN, startCloudSandbox, type CloudSandbox } from './cloud.js';

export { SANDBOX_SERVICE_ACCOUNT_TOKEN };

export interface SandboxOptions {
  cloud: boolean;
  faultRate: number;
  latencyMs: number;
  /** Only with cloud: the credentials the token endpoint accepts (CLOUD_API_CREDENTIALS in sandbox mode). */
  cloudCredentials?: unknown;
}

/** The simulators the gateway started in-process, each a real HTTP server on loopback. */
export interface Sandboxes {
  readonly cloud: CloudSandbox | null;
  close(): Promise<void>;
}

export async function startSandboxes(options: SandboxOptions): Promise<Sandboxes> {
  const cloud = options.cloud
    ? await startCloudSandbox({
        faultRate: options.faultRate,
        latencyMs: options.latencyMs,
        ...(options.cloudCredentials ? { acceptedCredentials: options.cloudCredentials } : {}),
      })
    : null;
  return {
    cloud,
    async close() {
      await cloud?.close();
    },
  };
}
