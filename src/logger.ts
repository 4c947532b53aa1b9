import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

/**
 * Paths redacted from every log line. Secrets never reach a log: API keys and upstream tokens travel in
 * headers, passwords and tokens in bodies (cloud users, VM users, mobile-ID notifications).
 */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'headers["idempotency-key"]',
  '*.password',
  '*.*.password',
  '*.access_token',
  '*.id_token',
  '*.accessToken',
  '*.idToken',
  '*.token',
  '*.client_notification_token',
  'password',
  'access_token',
  'id_token',
  'token',
  'credentials',
  '*.credentials',
];

export function createLogger(options: { level?: string; destination?: DestinationStream } = {}): Logger {
  return pino(
    {
      level: options.level ?? 'info',
      base: { service: 'gateway' },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    options.destination,
  );
}
