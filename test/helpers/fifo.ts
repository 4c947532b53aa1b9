import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';

/**
 * A named pipe at `file`, with a writer that opens it and closes it again as soon as a reader opens it. Code that
 * reads the pipe as a file then reads an empty text, and the test fails on what it says of it, rather than waiting
 * for a writer for ever with the test's own event loop held. `remove` ends the writer, still waiting when nothing
 * opened the pipe, and removes the pipe.
 */
export function namedPipe(file: string): { remove(): void } {
  execFileSync('mkfifo', [file]);
  const writer = spawn('sh', ['-c', ': > "$1"', 'sh', file], { stdio: 'ignore' });
  return {
    remove() {
      if (writer.exitCode === null && writer.signalCode === null) writer.kill();
      fs.rmSync(file, { force: true });
    },
  };
}
