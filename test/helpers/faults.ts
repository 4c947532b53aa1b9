// Faults the tests produce for real, outside the gateway's code: the operating system refuses what the gateway asks.
import { execFileSync } from 'node:child_process';

/**
 * Sets this process's soft file-size limit (RLIMIT_FSIZE, with `prlimit`): with 0, every write to a regular file
 * fails with EFBIG (Node ignores SIGXFSZ), so SQLite's next write fails at the system call (SQLITE_IOERR_WRITE)
 * whatever the user, root included, and reads go on. `null` lifts it. Pipes and sockets are not files: the test
 * runner's channel and the gateway's connections are untouched. Lowering a soft limit and raising it back up to the
 * hard one needs no privilege.
 */
export function fileSizeLimit(bytes: number | null): void {
  execFileSync('prlimit', ['--pid', String(process.pid), `--fsize=${bytes ?? 'unlimited'}:`]);
}

/** Why `fileSizeLimit` cannot work here, or null when it can (prlimit is util-linux's, on every Debian image). */
export function fileSizeLimitUnavailable(): string | null {
  try {
    execFileSync('prlimit', ['--pid', String(process.pid), '--fsize'], { stdio: 'pipe' });
    return null;
  } catch (err) {
    return `prlimit cannot set this process's file-size limit (${(err as Error).message.split('\n')[0]})`;
  }
}

/** Runs `work` while no file can be written, and lifts the limit after it, whatever happens. */
export async function whileFilesCannotGrow<T>(work: () => Promise<T>): Promise<T> {
  fileSizeLimit(0);
  try {
    return await work();
  } finally {
    fileSizeLimit(null);
  }
}
