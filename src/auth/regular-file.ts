// Every file the configuration names (the apps and issuers files, the JWKS files, the trusted-documents manifest, the
// certificate and key files of DATABASE_URL) is opened here first, and refused unless it is a regular file. A named
// pipe's read waits for a writer and a device's may never end, either holding the start or a reload on the event loop
// for as long; a folder's read fails as EISDIR, which said "cannot be read" of a path that is simply the wrong one.
import fs from 'node:fs';

/** The refusal's words, after the path. */
export const NOT_A_FILE = 'is not a file (a folder, a pipe or a device)';

/** A path that names something other than a regular file: nothing was read from it. */
export class NotAFileError extends Error {
  constructor(readonly file: string) {
    super(`${file} ${NOT_A_FILE}`);
  }
}

/**
 * Opens `file` for reading and returns its descriptor, once the open file says it is a regular file (asked of the
 * descriptor, so a path replaced meanwhile is judged as what is read). O_NONBLOCK lets a named pipe's open return at
 * once instead of waiting for a writer; it changes nothing for a regular file. Throws NotAFileError for anything else,
 * and the open's own error (ENOENT, EACCES) as it comes.
 */
export function openRegularFile(file: string): number {
  const fd = fs.openSync(file, fs.constants.O_RDONLY | (fs.constants.O_NONBLOCK ?? 0));
  let regular = false;
  try {
    regular = fs.fstatSync(fd).isFile();
  } finally {
    if (!regular) fs.closeSync(fd);
  }
  if (!regular) throw new NotAFileError(file);
  return fd;
}
