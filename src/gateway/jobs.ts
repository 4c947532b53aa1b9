// The gateway's background jobs, all of them in one list: started by startGateway, stopped together at shutdown.
import type { Events } from '../events/index.js';
import type { Logger } from '../logger.js';
import type { Services } from '../services.js';
import type { IdempotencyRecords } from '../store/idempotency.js';
import type { GatewayTesting } from './options.js';

/**
 * A background job of startGateway: `run` every `intervalMs` (a run still in flight is not overlapped; a failure is
 * logged with the job's name), and `stop` once at shutdown after the timer is cleared and the run under way has ended
 * (a last run, where one is due).
 */
interface BackgroundJob {
  readonly name: string;
  readonly intervalMs: number;
  run(): Promise<unknown>;
  stop?(): Promise<unknown>;
}

/**
 * Starts the jobs, logs their list once, and returns the one stop of them all: it cancels every schedule, waits for
 * the runs under way until `deadline` (epoch ms: the end of the shutdown's drain), then calls each job's `stop`, in
 * order. A run is waited for because the store closes after the jobs stop: closed under a run (a pass over pending
 * mobile-ID notifications waiting on the JWKS, a purge on PostgreSQL), the run would fail, and a notification it had
 * claimed would wait out its lease after the restart.
 */
export function startJobs(
  jobs: readonly BackgroundJob[],
  logger: Logger,
  schedule?: GatewayTesting['scheduleJob'],
): (deadline: number) => Promise<void> {
  let stopped = false;
  /** The run under way of each job, removed when it ends. */
  const running = new Map<string, Promise<void>>();
  const cancels = jobs.map((job) => {
    const tick = () => {
      if (stopped || running.has(job.name)) return;
      const run = job
        .run()
        .then(
          () => undefined,
          (err: unknown) => void logger.warn({ err, job: job.name }, `background job failed: ${job.name}`),
        )
        .finally(() => running.delete(job.name));
      running.set(job.name, run);
    };
    if (schedule) return schedule(job.name, tick);
    const timer = setInterval(tick, job.intervalMs);
    timer.unref();
    return () => clearInterval(timer);
  });
  logger.debug({ jobs: jobs.map((j) => ({ name: j.name, intervalMs: j.intervalMs })) }, 'background jobs started');
  return async (deadline) => {
    stopped = true;
    for (const cancel of cancels) cancel();
    await waitForRuns(running, deadline, logger);
    for (const job of jobs)
      await job
        .stop?.()
        .catch((err: unknown) => logger.warn({ err, job: job.name }, `background job failed to stop: ${job.name}`));
  };
}

/**
 * Waits for the runs under way, but not past `deadline`: the drain bounds them as it bounds requests, so that the
 * store still closes before the exit deadline (SHUTDOWN). A run still going then is named, and the store closes under
 * it.
 */
async function waitForRuns(running: Map<string, Promise<void>>, deadline: number, logger: Logger): Promise<void> {
  if (running.size === 0) return;
  const names = () => [...running.keys()];
  logger.info({ jobs: names() }, `shutdown waits for the background jobs under way: ${names().join(', ')}`);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), Math.max(0, deadline - Date.now()));
    timer.unref();
  });
  const outcome = await Promise.race([Promise.all(running.values()), late]);
  clearTimeout(timer);
  if (outcome === 'late')
    logger.warn(
      { jobs: names() },
      `background jobs still running at the end of the drain, the store closes under them: ${names().join(', ')}`,
    );
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
