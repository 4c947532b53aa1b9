// The loader hooks of module-log.mjs (they run on the loader's own thread): each URL loaded, appended to the file.
import fs from 'node:fs';

let file;

export function initialize(data) {
  file = data.file;
}

export async function load(url, context, next) {
  fs.appendFileSync(file, `${url}\n`);
  return next(url, context);
}
