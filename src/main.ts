// Before any other import: NODE_ENV, unset, is production when the libraries load (src/config/node-env.ts), and
// V8's collector is set as V8_HEAP_GROWING_PERCENT and V8_ALLOCATION_SITE_PRETENURING ask (src/config/v8-heap.ts).
import './config/node-env.js';
import './config/v8-heap.js';

import { ConfigError, describeUpstreams, loadConfig, loadStoreConfig } from './config/index.js';
import { shownUrl } from './errors.js';
import { ListenError } from './gateway/listen.js';
import { SHUTDOWN, type Gateway } from './gateway/options.js';
import { startGateway } from './gateway/start.js';
import { createLogger, exitAfterLogs, logUnexpected, resolveLogFormat } from './logger.js';
import { openStore, StoreOpenError } from './store/index.js';

/**
 * `main.js migrate`: applies the migrations the database lacks and exits (0 when it has them all), listening on
 * nothing. Reads only the database's settings (loadStoreConfig), so a migration Job needs no key, file or upstream.
 */
async function migrate(): Promise<void> {
  const config = loadStoreConfig();
  const logger = createLogger({
    level: config.logLevel,
    format: resolveLogFormat(config.logFormat, process.stdout.isTTY === true),
  });
  const store = await openStore({
    dataDir: config.dataDir,
    databaseUrl: config.databaseUrl,
    sqliteSynchronous: config.sqliteSynchronous,
    logger,
    migrations: 'apply',
  });
  await store.close();
  logger.info({ store: store.location }, 'migrate: the database has every migration of this release');
  exitAfterLogs(logger, 0);
}

async function main(): Promise<void> {
  const command = process.argv[2];
  if (command === 'migrate') return migrate();
  if (command !== undefined) {
    process.stderr.write(
      `gateway: unknown command ${JSON.stringify(command)}: run it with no argument to serve, or \`migrate\` to apply the database migrations and exit\n`,
    );
    process.exit(2);
  }
  // A SIGHUP while the gateway starts (waiting for PostgreSQL or for the migrations, which may take minutes) must not
  // meet the default action, the end of the process: it is remembered, and the files, which may have changed since
  // they were read, are read again once the gateway has started.
  let hupWhileStarting = false;
  const hupBeforeStart = () => void (hupWhileStarting = true);
  process.on('SIGHUP', hupBeforeStart);
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`gateway: invalid configuration: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const logger = createLogger({
    level: config.logLevel,
    format: resolveLogFormat(config.logFormat, process.stdout.isTTY === true),
  });
  // Said once: what the operator set that has no effect (its name and why, never its value). A reload reads the
  // same variables, so it would say the same again.
  for (const { variable, why } of config.ignored) logger.warn({ variable }, `${variable}: ${why}`);
  // A promise rejected with nothing to handle it is a bug of one task, not a reason to drop every request in flight
  // (Node's default ends the process): logged once, in full and masked, and the gateway goes on serving. An uncaught
  // exception keeps Node's default: thrown out of a callback, it may have left shared state half changed.
  process.on('unhandledRejection', (reason) =>
    logUnexpected(logger, reason, {}, 'a promise was rejected and nothing handled it; the gateway goes on serving'),
  );
  // SIGTERM and SIGINT are handled from here on, before the start: one that comes while the gateway waits for
  // PostgreSQL or for the migrations (which may take minutes) must end it as a shutdown does (exit 0, logged), not by
  // the signal's default action (no line, status 143). It stops the start where it waits, and what the start opened
  // is closed. Once started, the gateway drains before it exits.
  const starting = new AbortController();
  let gateway: Gateway | undefined;
  let stopping = false;
  const closeAndExit = (started: Gateway) => {
    started
      .close()
      .then(() => {
        logger.info('shutdown complete');
        exitAfterLogs(logger, 0);
      })
      .catch((err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        exitAfterLogs(logger, 1);
      });
  };
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info(
      { signal },
      gateway
        ? 'shutting down: draining in-flight requests'
        : 'shutting down during the start: it stops, and what it opened is closed',
    );
    const force = setTimeout(() => {
      logger.error(`shutdown took longer than ${SHUTDOWN.exitMs / 1000} s; exiting`);
      process.exit(1);
    }, SHUTDOWN.exitMs);
    force.unref();
    if (gateway) closeAndExit(gateway);
    else starting.abort(new Error(`${signal} during the start`));
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  let started: Gateway;
  try {
    started = await startGateway(config, { logger, signal: starting.signal });
  } catch (err) {
    // Stopped by the signal: what it opened is closed already (startGateway), and the shutdown is complete.
    if (stopping && err === starting.signal.reason) {
      logger.info('shutdown complete');
      return exitAfterLogs(logger, 0);
    }
    throw err;
  }
  // The signal came as the start ended, past its last wait: the gateway shuts down at once, before its ready line.
  if (stopping) return closeAndExit(started);
  gateway = started;
  // The signals are handled before the start-up line says the gateway is ready: a SIGHUP sent on seeing it must
  // reload, never meet the default action (the end of the process).
  // SIGHUP reads the configuration files again (docs/decisions/057); it no longer ends the process.
  const reloadOnHup = () => {
    if (stopping) return;
    started.reload('SIGHUP').catch((err: unknown) => {
      logger.error({ err, trigger: 'SIGHUP' }, 'configuration reload failed unexpectedly');
    });
  };
  process.on('SIGHUP', reloadOnHup);
  process.off('SIGHUP', hupBeforeStart);
  const described = describeUpstreams(config.upstreams);
  const upstreams = Object.entries(described)
    .map(([name, where]) => `${name}=${where}`)
    .join(' ');
  const names = [
    ...new Set(
      [...config.apiKeys, ...config.operatorKeys]
        .flatMap((k) => (k.name === null ? [] : [k.name]))
        .concat(config.appsFile.map((a) => a.name)),
    ),
  ].sort();
  const keyCount =
    config.apiKeys.length + config.operatorKeys.length + config.appsFile.reduce((n, a) => n + a.keyDigests.length, 0);
  const keyed = keyCount ? `keyed (${keyCount} API key(s)${names.length ? `; apps ${names.join(', ')}` : ''})` : null;
  const jwts = config.jwtAuth ? `JWTs of ${config.jwtAuth.issuers.map((i) => i.issuer).join(', ')}` : null;
  const access = config.open ? 'OPEN (no API keys: sandbox only)' : [keyed, jwts].filter(Boolean).join(' and ');
  const graphiql = config.introspection
    ? `GraphiQL ${gateway.url}/graphql`
    : `GraphQL ${gateway.url}/graphql (introspection off)`;
  // The identification callback is configured per workflow on the platform side; its token is a secret, so the
  // line shows the route and where to read the full address, never the address itself.
  // PUBLIC_URL may hold the password of a proxy in front of the gateway: the line shows it without.
  const publicUrl = shownUrl(gateway.publicUrl);
  const identificationCallbacks = `identification callbacks POST ${publicUrl}/webhooks/identification/<token> (address per workflow: query { identificationCallbackUrl(workflowId: "...") })`;
  // The sandbox's notification token is a secret of the data directory (whoever holds it posts results every app
  // reads); the operator who started this gateway is the one it is shown to, for curl (apps use
  // issueMobileIdNotificationToken or sandboxCompleteMobileIdAuthentication instead).
  const sandboxToken = gateway.sandbox.mobileId?.notificationToken;
  const mobileIdSandbox = sandboxToken
    ? ` | mobile-ID sandbox: POST ${gateway.url}/webhooks/mobile-id with Authorization: Bearer ${sandboxToken}`
    : '';
  // Where each answer shape the specs do not show is read: the operator's *_PATH, or the documented guesses.
  const cloudShapes = gateway.services.cloud.describeShapes();
  const identityShapes = gateway.services.identity.describeShapes();
  const shapes = {
    cloudCreatedId: cloudShapes.createdId,
    cloudToken: cloudShapes.token,
    cloudIpAddress: cloudShapes.address,
    verificationExternalId: identityShapes.externalId,
    verificationResults: identityShapes.results,
    verificationCallbackUrl: identityShapes.callbackUrl,
  };
  const shapeLine =
    `answer shapes: cloud created id ${shapes.cloudCreatedId}; cloud token ${shapes.cloudToken}; IP address ${shapes.cloudIpAddress}; ` +
    `verification id ${shapes.verificationExternalId}; results ${shapes.verificationResults}; callbackUrl ${shapes.verificationCallbackUrl}`;
  // Each upstream client's breaker, with its settings: `cloud=closed (opens past 50% of 5 attempts, reset 30s, 10 trials)`.
  const circuits = gateway.circuits();
  const circuitLine = Object.entries(circuits)
    .map(([name, state]) => {
      const b =
        config.upstream.breakers[
          name === 'identification-prodlike' ? 'identification' : (name as keyof typeof config.upstream.breakers)
        ];
      return state === 'off' || !b
        ? `${name}=off`
        : `${name}=${state} (opens past ${Math.round(b.errorThreshold * 100)}% of ${b.volume} attempts, reset ${b.resetTimeoutMs / 1000}s, ${b.halfOpenAttempts} trials)`;
    })
    .join(' ');
  logger.info(
    {
      url: gateway.url,
      publicUrl,
      upstreams: described,
      circuits,
      store: gateway.services.store.location,
      open: config.open,
      shapes,
    },
    `gateway ready: ${graphiql} | upstreams ${upstreams} | circuits ${circuitLine} | data ${gateway.services.store.location} | API ${access} | ${identificationCallbacks} | ${shapeLine}${mobileIdSandbox}`,
  );
  if (config.open)
    logger.warn(
      'the API is open: anyone who reaches this port may call it (allowed because every upstream is sandboxed)',
    );
  if (hupWhileStarting) {
    logger.info({ signal: 'SIGHUP' }, 'a SIGHUP came while the gateway started: reading the files again');
    reloadOnHup();
  }
}

main().catch((err: unknown) => {
  // A setting the gateway can check only at start-up (the trusted-documents manifest) is still a configuration error.
  if (err instanceof ConfigError) {
    process.stderr.write(`gateway: invalid configuration: ${err.message}\n`);
    process.exit(2);
  }
  // A store or a port the gateway cannot use is the operator's to fix, and its message says how: no stack trace to
  // read past. Anything else is unexpected, and its stack is for whoever debugs it.
  const known = err instanceof StoreOpenError || err instanceof ListenError;
  process.stderr.write(
    `gateway: failed to start: ${err instanceof Error ? (known ? err.message : (err.stack ?? err.message)) : String(err)}\n`,
  );
  process.exit(1);
});
