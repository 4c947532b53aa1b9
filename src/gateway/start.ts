// The composition root (DESIGN.md): startGateway builds every part from the config and wires them together, top to
// bottom: store → secret → services (events, upstreams, domains) → the live configuration → pipeline → transports →
// listen. Nothing else reads globals; tests start as many gateways as they like, each on port 0.
import type { Config } from '../config/index.js';
import { shownUrl } from '../errors.js';
import { createLogger } from '../logger.js';
import { Metrics } from '../metrics.js';
import { pauseAt } from '../phases.js';
import { loadSecretBox } from '../secret.js';
import { openStore } from '../store/index.js';
import { AcceptedNames, recordAppNames } from '../store/key-app-names.js';
import { createTracing } from '../telemetry/tracing.js';
import { gatewayJobs, startJobs } from './jobs.js';
import { GatewayServer } from './listen.js';
import { LiveConfiguration, readStartFiles, recordConfiguredNames, type RecordNames } from './live.js';
import { SHUTDOWN, type Gateway, type GatewayOptions } from './options.js';
import { buildPipeline, contextBuilder, gatewaySchema } from './pipeline.js';
import { buildServices, WEBHOOK_EVENT_KINDS } from './services.js';
import { buildTransports } from './transports.js';

export async function startGateway(config: Config, options: GatewayOptions = {}): Promise<Gateway> {
  const logger = options.logger ?? createLogger({ level: config.logLevel });
  const metrics = new Metrics();
  const testing = options.testing ?? {};
  const now = testing.clock ?? Date.now;
  const { signal } = options;
  // The files the start checks are read first: a bad one stops it before anything below is opened or written.
  const schema = gatewaySchema();
  const trustedAtStart = readStartFiles(config, schema);
  // What shutdown undoes, in the reverse order of what was built.
  const cleanups: Array<() => Promise<void>> = [];
  const onClose = (close: () => Promise<void>) => void cleanups.push(close);
  // The end of the shutdown's drain (epoch ms), set as it begins: what waits during the shutdown waits no longer.
  let drainDeadline = 0;
  const closeAll = async () => {
    drainDeadline = Date.now() + SHUTDOWN.drainMs;
    for (const c of cleanups.reverse())
      await c().catch((err: unknown) => logger.error({ err }, 'error during shutdown'));
  };

  try {
    const tracing = await createTracing(config.tracing, { exporter: testing.traceExporter });
    onClose(() => tracing.close());

    // PostgreSQL may not answer yet (the gateway started before its database): the port is open at once, alive but
    // not ready, while the store waits for it. SQLite opens at once, and the gateway listens when it is built.
    const http = new GatewayServer(options.port ?? config.port, options.host ?? config.host);
    onClose(() => http.drain());
    let waitingFor = 'connecting to PostgreSQL';
    if (config.databaseUrl) {
      // waitingFor names the database's address and its driver's refusal: /readyz and the log say it, other routes not.
      await http.listenWhileStarting(
        () => waitingFor,
        () => 'waiting for its database',
      );
      logger.info(
        { url: http.url },
        'listening: not ready (/readyz) until PostgreSQL answers and the gateway has started',
      );
    }
    const store = await openStore({
      dataDir: config.dataDir,
      databaseUrl: config.databaseUrl,
      sqliteSynchronous: config.sqliteSynchronous,
      sqliteCommitWindowMs: config.sqliteCommitWindowMs,
      requestArrivals: http.arrivals,
      sqliteCheckpointIntervalMs: config.sqliteCheckpointIntervalMs,
      sqliteWalRestartFrames: config.sqliteWalRestartFrames,
      sqliteWalPreallocate: config.sqliteWalPreallocate,
      sqliteCheckpointSync: config.sqliteCheckpointSync,
      sqliteCheckpointNice: config.sqliteCheckpointNice,
      sqliteWalReadAheadMb: config.sqliteWalReadAheadMb,
      sqliteCacheKib: config.sqliteCacheKib,
      pgNamedStatements: config.storePgNamedStatements,
      migrations: config.databaseMigrations,
      logger,
      onUnreachable: (why) => {
        if (why !== null) waitingFor = why;
      },
      signal,
    });
    onClose(() => store.close());
    // A shutdown during the wait stopped it above; one during the migrations, once they are done, stops the start here.
    signal?.throwIfAborted();

    // One gateway secret (TOKEN_ENCRYPTION_KEY, or its key file in DATA_DIR): it seals what is stored and keys digests.
    const box = loadSecretBox({
      key: config.tokenEncryptionKey,
      dataDir: config.dataDir,
      shared: store.dialect === 'postgres',
      keptCipher: config.sealKeptCipher,
      logger,
    });

    // GATEWAY_TEST_PAUSE_AT (tests only): undefined unless set, so the call sites cost one check.
    const pause = pauseAt(config.testPauseAt, logger);
    let live: LiveConfiguration | undefined;
    const { services, upstreams, idempotencyRecords, replicated, cloudLookup } = await buildServices(config, {
      logger,
      metrics,
      store,
      box,
      tracing,
      testing,
      now,
      pause,
      listenedUrl: () => http.url,
      configured: () => live!.configured,
      onClose,
    });
    // Stopped before the services and the store close: the runs under way end first, within the drain.
    const stopJobs = startJobs(
      gatewayJobs({ services, idempotencyRecords, webhookEventKinds: WEBHOOK_EVENT_KINDS, now }),
      logger,
      testing.scheduleJob,
    );
    onClose(() => stopJobs(drainDeadline));
    // Nor does a start whose shutdown came while its services were built go on (what remains is quick: src/main.ts
    // closes a gateway whose start ended after the signal).
    signal?.throwIfAborted();

    // Who may call and which documents are trusted (read first of all, above): taken now, and read again by each
    // reload (docs/decisions/057). The app names configured (with keys, or listed by an identity provider's entry)
    // are recorded first, and every name recorded before read back: `*` takes none of them from the first request
    // served (docs/decisions/058). A key app named as an app `*` accepted before stops the start (a ConfigError).
    const recordNames: RecordNames = (names, keyApps, merged) =>
      recordAppNames(store.db, names, now(), keyApps, merged);
    // One for the process, across reloads: a name `*` accepted is written once, whichever configuration accepted it.
    const acceptedNames = new AcceptedNames(store.db, now);
    live = new LiveConfiguration(config, {
      logger,
      metrics,
      box,
      schema,
      now,
      prepareMobileIdKeys: () => services.mobileId.prepareKeysReload(),
      appNames: await recordConfiguredNames(config, recordNames),
      recordAppNames: recordNames,
      wildcardNames: { accept: (name) => acceptedNames.accept(name) },
      trusted: trustedAtStart,
    });

    const contextFor = contextBuilder(services, logger);
    const built = await buildPipeline(config, {
      schema,
      services,
      logger,
      tracing,
      trusted: live.trustedAdmission(),
      contextFor,
      directPath: testing.directPath !== false,
      onClose,
    });
    const reload = live.reload.bind(live);
    const transports = buildTransports(config, {
      schema,
      built,
      services,
      live,
      upstreams,
      replicated,
      cloudLookup,
      contextFor,
      logger,
      tracing,
      now,
      pause,
      options,
      // What the transports show (MCP metadata and challenges, approval links, GraphiQL): never a password of
      // PUBLIC_URL, which only the callback addresses handed to an upstream or an app carry (services.ts).
      publicUrl: () => shownUrl(config.publicUrl ?? http.url),
      digest: (text) => box.digest(text),
      reload: () => reload('POST /admin/reload'),
      stopping: () => http.draining,
    });
    await http.serve(transports, logger, metrics);
    // Shutdown order: stop accepting, close subscriptions, let in-flight requests finish, then the rest. The port
    // closes first: a peer slow to answer its stream's close must not keep the gateway accepting (and ready).
    onClose(async () => {
      const drained = http.drain();
      await transports.close();
      await drained;
    });

    let closing: Promise<void> | null = null;
    return {
      url: http.url,
      publicUrl: config.publicUrl ?? http.url,
      server: http.server,
      services,
      sandbox: upstreams.sandbox,
      circuits: upstreams.circuits,
      logger,
      directPath: built.direct,
      documents: built.documents,
      limits: built.limits,
      reload,
      close() {
        closing ??= closeAll();
        return closing;
      },
    };
  } catch (err) {
    await closeAll();
    throw err;
  }
}
