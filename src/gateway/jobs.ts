// The gateway's background jobs, all of them in one list: started by startGateway, stopped together at shutdown.
import type { Events } from '../events/index.js';
import type { Logger } from '../logger.js';
import type { Services } from '../services.js';
import type { IdempotencyRecords } from '../store/idempotency.js';
import type { GatewayTesting } from './options.js';

/**
 * A background job of startGateway: `run` every `intervalMs` (a run still in flight is not overlapped; a failure is
 * logged with the job's name), and `stop` once at shutdown after the timer is cleared (a last run, where one is due).
 */
interface BackgroundJob {
  readonly name: string;
  readonly intervalMs: number;
  run(): Promise<unknown>;
  stop?(): Promise<unknown>;
}

/** Starts the jobs, logs their list once, and returns the one stop of them all (each job's `stop`, in order). */
export function startJobs(
  jobs: readonly BackgroundJob[],
  logger: Logger,
  schedule?: GatewayTesting['scheduleJob'],
): () => Promise<void> {
  const cancels = jobs.map((job) => {
    let running = false;
    const tick = () => {
      if (running) return;
      running = true;
      job
        .run()
        .catch((err: unknown) => logger.warn({ err, job: job.name }, `background job failed: ${job.name}`))
        .finally(() => (running = false));
    };
    if (schedule) return schedule(job.name, tick);
    const timer = setInterval(tick, job.intervalMs);
    timer.unref();
    return () => clearInterval(timer);
  });
  logger.debug({ jobs: jobs.map((j) => ({ name: j.name, intervalMs: j.intervalMs })) }, 'background jobs started');
  return async () => {
    for (const cancel of cancels) cancel();
    for (const job of jobs)
      await job
        .stop?.()
        .catch((err: unknown) => logger.warn({ err, job: job.name }, `background job failed to stop: ${job.name}`));
  };
}

/** Every background job of the gateway (the storage recount only where replicas share the database). */
export function gatewayJobs(parts: {
  services: Services;
  idempotencyRecords: IdempotencyRecords;
  /** The kinds of the events webhooks store, whose purge releases their app's storage. */
  webhookEventKinds: readonly string[];
  now: () => number;
}): BackgroundJob[] {
  const { services, idempotencyRecords, webhookEventKinds, now } = parts;
  const { store, storage, rateLimits, mobileId } = services;
  const activity = services.apps.activity;
  const log: Events['log'] = services.events.log;
  return [
    // Every replica writes when it last saw each app every few seconds, and once more when it stops.
    { name: 'app activity', intervalMs: 5_000, run: () => activity.flush(), stop: () => activity.flush() },
    { name: 'purge idempotency records', intervalMs: 60_000, run: () => idempotencyRecords.purgeExpired(now()) },
    {
      name: 'purge expired events',
      intervalMs: 60_000,
      run: () =>
        log.purgeExpired(now(), {
          kinds: webhookEventKinds,
          release: (scope, rows, chars) => storage.release('events', scope, rows, chars),
        }),
    },
    { name: 'purge expired mobile-ID secrets', intervalMs: 60_000, run: () => mobileId.purgeExpired(now()) },
    { name: 'purge rate-limit counters', intervalMs: 60_000, run: () => rateLimits.purgeExpired() },
    {
      name: 'purge agent plans',
      intervalMs: 60_000,
      run: async () => {
        await services.agentPlans.purgeExpired(now());
        const counts = await services.agentPlans.countByState();
        services.metrics.agentPlans.reset();
        for (const [state, plans] of counts) services.metrics.agentPlans.set({ state }, plans);
      },
    },
    // Other replicas write and purge too: their share is counted in from the database every ten minutes.
    ...(store.dialect === 'postgres'
      ? [
          {
            name: 'recount app storage',
            intervalMs: 600_000,
            run: () => storage.resync(store.db, { webhookEventKinds }, now()),
          },
        ]
      : []),
    // Notifications acknowledged while their id_token could not be verified: retried on their own schedule
    // (src/mobile-id/pending.ts); each replica looks, one takes each row.
    { name: 'pending mobile-ID verification', intervalMs: 2_000, run: () => mobileId.verifyPending() },
  ];
}
