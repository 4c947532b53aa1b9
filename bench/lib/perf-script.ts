import fs from 'node:fs';

/** One sample of `perf script` text: its process and thread, and its frames innermost first. */
export interface PerfSample {
  pid: number;
  tid: number;
  /** Each frame as perf printed it after the address: the symbol (with its `+0x` offset) and, if asked for, ` (dso)`. */
  frames: string[];
}

/**
 * The samples of `perf script` text (`-F comm,pid,tid,ip,sym,dso`, or `-F tid,ip,sym`): a header line (`comm pid/tid`,
 * or the thread's id alone, then pid is the tid), then one line per frame (an address and what follows it), then a
 * blank line. Read by the experiments that give perf's samples to stages or owners.
 */
export function readPerfScript(file: string): PerfSample[] {
  const samples: PerfSample[] = [];
  let current: PerfSample | null = null;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (line.trim() === '') {
      if (current) samples.push(current);
      current = null;
      continue;
    }
    const frame = /^\s+[0-9a-f]+ (.*)$/.exec(line);
    if (frame) {
      current?.frames.push(frame[1]!.trim());
      continue;
    }
    if (current !== null) continue;
    const ids = /(\d+)\/(\d+)\s*$/.exec(line) ?? /^\s*(\d+)\s*$/.exec(line);
    if (ids) current = { pid: Number(ids[1]), tid: Number(ids[2] ?? ids[1]), frames: [] };
  }
  if (current) samples.push(current);
  return samples;
}
