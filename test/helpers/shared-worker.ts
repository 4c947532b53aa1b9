// Vitest setupFile of the `suite` project, whose files share a worker process and its module cache (isolate: false in
// vitest.config.ts): it runs before each file, and its afterAll after the file's own. What a file changes in the
// process and leaves behind would reach the files after it in that worker, so each file ends by putting back the
// spies, the clock, process.env and the process listeners it found; a file that left process.env or a listener
// behind fails, naming it, so that the leak is mended in the file that made it.
import { afterAll, vi } from 'vitest';

// The listeners that decide how a later file's failures are seen. Not 'exit' nor the signals: modules add their
// clean-up for those once, when first evaluated in the worker (scripts/embedded-postgres.ts and bench/lib/processes.ts
// stop what they started, then exit as the signal would have), and those belong to the worker, not to the file that
// loaded them first.
const WATCHED = ['unhandledRejection', 'uncaughtException', 'warning'] as const;

const env = { ...process.env };
// Node's typings name the listeners of one event at a time, not of a union of events: read them as 'warning' ones.
const listeners = new Map<string, unknown[]>(WATCHED.map((event) => [event, process.listeners(event as 'warning')]));

afterAll(() => {
  vi.restoreAllMocks();
  vi.useRealTimers();
  vi.unstubAllEnvs();
  vi.unstubAllGlobals();

  const left: string[] = [];
  for (const key of new Set([...Object.keys(env), ...Object.keys(process.env)])) {
    if (process.env[key] === env[key]) continue;
    left.push(`process.env.${key}`);
    if (env[key] === undefined) delete process.env[key];
    else process.env[key] = env[key];
  }
  for (const [event, found] of listeners) {
    for (const listener of process.listeners(event as 'warning')) {
      if (found.includes(listener)) continue;
      left.push(`a process '${event}' listener`);
      process.off(event, listener);
    }
  }
  if (left.length > 0) throw new Error(`this file left behind, for the next file in its worker: ${left.join(', ')}`);
});
