// Run by test/exit-after-logs.test.ts in a child process with UV_THREADPOOL_SIZE=1: it holds libuv's one pool thread
// in an open() of a FIFO that nobody writes yet, logs one line (whose write, on that pool, now waits behind the open),
// then exits as EXIT_WITH says: `exitAfterLogs`, or a bare `process.exit`. Last, it opens the FIFO for writing, which
// lets the pool go on: a line still waiting then is written only by a process that has not exited yet.
import fs from 'node:fs';

const { createLogger, exitAfterLogs } = await import(process.env.LOGGER_MODULE);
const fifo = process.env.FIFO;
const logger = createLogger({ format: 'json' });
fs.open(fifo, 'r', () => undefined);
logger.info('the last line before the exit');
if (process.env.EXIT_WITH === 'exitAfterLogs') exitAfterLogs(logger, 0);
else process.exit(0);
fs.closeSync(fs.openSync(fifo, 'w'));
