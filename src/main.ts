import { startGateway } from './app.js';
import { ConfigError, describeUpstreams, loadConfig } from './config.js';
import { createLogger, resolveLogFormat } from './logger.js';

async function main(): Promise<void> {
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
  const logger = createLogger({ level: config.logLevel, format: resolveLogFormat(config.logFormat, process.stdout.isTTY === true) });
  const gateway = await startGateway(config, { logger });
  const described = describeUpstreams(config.upstreams);
  const upstreams = Object.entries(described)
    .map(([name, where]) => `${name}=${where}`)
    .join(' ');
  const names = [...new Set([...config.apiKeys, ...config.operatorKeys].flatMap((k) => (k.name === null ? [] : [k.name])).concat(config.appsFile.map((a) => a.name)))].sort();
  const keyCount = config.apiKeys.length + config.operatorKeys.length + config.appsFile.reduce((n, a) => n + a.keyDigests.length, 0);
  const keyed = keyCount ? `keyed (${keyCount} API key(s)${names.length ? `; apps ${names.join(', ')}` : ''})` : null;
  const jwts = config.jwtAuth ? `JWTs of ${config.jwtAuth.issuer}` : null;
  const access = config.open ? 'OPEN (no API keys: sandbox only)' : [keyed, jwts].filter(Boolean).join(' and ');
  const graphiql = config.introspection ? `GraphiQL ${gateway.url}/graphql` : `GraphQL ${gateway.url}/graphql (introspection off)`;
  // The identification callback is configured per workflow on the platform side; its token is a secret, so the
  // line shows the route and where to read the full address, never the address itself.
  const identificationCallbacks = `identification callbacks POST ${gateway.publicUrl}/webhooks/identification/<token> (address per workflow: query { identificationCallbackUrl(workflowId: "...") })`;
  // The sandbox's notification token is a secret of the data directory (whoever holds it posts results every app
  // reads); the operator who started this gateway is the one it is shown to, for curl (apps use
  // issueMobileIdNotificationToken or sandboxCompleteMobileIdAuthentication instead).
  const sandboxToken = gateway.sandbox.mobileId?.notificationToken;
  const mobileIdSandbox = sandboxToken ? ` | mobile-ID sandbox: POST ${gateway.url}/webhooks/mobile-id with Authorization: Bearer ${sandboxToken}` : '';
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
  logger.info(
    { url: gateway.url, publicUrl: gateway.publicUrl, upstreams: described, store: gateway.services.store.location, open: config.open, shapes },
    `gateway ready: ${graphiql} | upstreams ${upstreams} | data ${gateway.services.store.location} | API ${access} | ${identificationCallbacks} | ${shapeLine}${mobileIdSandbox}`,
  );
  if (config.open) logger.warn('the API is open: anyone who reaches this port may call it (allowed because every upstream is sandboxed)');

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down: draining in-flight requests');
    const force = setTimeout(() => {
      logger.error('shutdown took longer than 25 s; exiting');
      process.exit(1);
    }, 25_000);
    force.unref();
    gateway
      .close()
      .then(() => {
        logger.info('shutdown complete');
        process.exit(0);
      })
      .catch((err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      });
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((err: unknown) => {
  // A setting the gateway can check only at start-up (the trusted-documents manifest) is still a configuration error.
  if (err instanceof ConfigError) {
    process.stderr.write(`gateway: invalid configuration: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`gateway: failed to start: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  process.exit(1);
});
