import { createCipheriv, createDecipheriv, createHash, hash, hkdfSync, randomBytes, randomFillSync } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

import { decodeKey } from './config/index.js';
import type { Logger } from './logger.js';

const KEY_FILE_NAME = 'token-encryption.key';
const PREFIX = 'gcm1';

/** Random IVs drawn from a pooled buffer: one getrandom call per 1,024 IVs instead of one per seal. */
const IV_POOL = Buffer.alloc(12 * 1024);
let ivOffset = IV_POOL.length;

function nextIv(): Buffer {
  if (ivOffset === IV_POOL.length) {
    randomFillSync(IV_POOL);
    ivOffset = 0;
  }
  // A copy: the pool is refilled in place, and each IV is used once.
  const iv = Buffer.from(IV_POOL.subarray(ivOffset, ivOffset + 12));
  ivOffset += 12;
  return iv;
}

/**
 * The associated data of a sealed value, from its parts: their JSON array, so that no two lists of parts give the
 * same text (`["a:b","c"]` and `["a","b:c"]` differ, a null owner differs from the text "null"). Every context
 * written since owners were bound names the owner scope among its parts (docs/decisions/050).
 */
export function sealingContext(...parts: readonly (string | number | null)[]): string {
  return JSON.stringify(parts);
}

/** SHA-256's block size in bytes: the length of HMAC's pads. */
export const SHA256_BLOCK = 64;

/**
 * HMAC-SHA256 under one key, from the key's inner and outer pads made once (RFC 2104): HMAC(k, m) is
 * SHA-256(opad ‖ SHA-256(ipad ‖ m)), two one-shot `crypto.hash` calls (the digest looked up once per process), where
 * `createHmac` makes an Hmac object, with its key handle, and fetches SHA-256 by name on every call. Used once per
 * event for its cursor's seal (decision 108) and once per creation and notification for their keyed fingerprints
 * (decision 110); test/mobile-id/sealing.test.ts and test/events/cursor-ctr.test.ts compare it with `createHmac`.
 *
 * The hashes answer as latin1 text (a byte per character), not as a Buffer: on Node 20 and 26 `crypto.hash` takes
 * ~1 µs longer to give a Buffer than a string (decision 153). The outer block is one buffer kept for the instance,
 * the outer pad written into it once: a MAC is made in one synchronous call, so no two use it at once.
 */
export class HmacSha256 {
  private readonly ipad = Buffer.alloc(SHA256_BLOCK, 0x36);
  /** The outer pad, then the inner hash of the MAC being made (SHA256_BLOCK on). */
  private readonly outer = Buffer.alloc(SHA256_BLOCK + 32, 0x5c);

  constructor(key: Buffer) {
    // A longer key would be hashed first (RFC 2104); every key here is 32 bytes.
    if (key.length > SHA256_BLOCK) throw new Error('an HMAC key here is at most 64 bytes');
    for (let i = 0; i < key.length; i++) {
      this.ipad[i]! ^= key[i]!;
      this.outer[i]! ^= key[i]!;
    }
  }

  /** A buffer holding the inner pad, then room for `bytes` of message from SHA256_BLOCK on: write it in place. */
  inner(bytes: number): Buffer {
    const inner = Buffer.allocUnsafe(SHA256_BLOCK + bytes);
    this.ipad.copy(inner, 0);
    return inner;
  }

  /** The MAC (32 bytes) of the message written into `inner` (made by `inner`) after the pad. */
  of(inner: Buffer): Buffer {
    return Buffer.from(this.outerHash(inner, 'binary'), 'latin1');
  }

  /** The MAC as 64 hex digits. */
  hexOf(inner: Buffer): string {
    return this.outerHash(inner, 'hex');
  }

  private outerHash(inner: Buffer, encoding: 'binary' | 'hex'): string {
    // 'binary' is latin1's other name, the one Node's types accept here.
    this.outer.write(hash('sha256', inner, 'binary'), SHA256_BLOCK, 'latin1');
    return hash('sha256', this.outer, encoding);
  }
}

/**
 * Encrypts the tokens that notifications carry before they reach the event log (AES-256-GCM, a fresh
 * 96-bit IV per value, the owner, the event and the field name as associated data so a ciphertext cannot be
 * moved to another event or another owner's), and derives a keyed digest for telling duplicates apart without
 * a clear-text hash. See docs/decisions/005-mobile-id-token-storage.md and 050.
 */
export class SecretBox {
  /** First 8 hex digits of sha256(key): names the key in each sealed value, so a wrong key is diagnosable. */
  readonly keyId: string;
  private readonly encKey: Buffer;
  /** The keyed digest's HMAC, under a key derived from the master key. */
  private readonly mac: HmacSha256;

  constructor(private readonly masterKey: Buffer) {
    if (masterKey.length !== 32) throw new Error('the token encryption key must be 32 bytes');
    this.keyId = createHash('sha256').update(masterKey).digest('hex').slice(0, 8);
    this.encKey = Buffer.from(hkdfSync('sha256', masterKey, Buffer.alloc(0), 'gateway token encryption v1', 32));
    this.mac = new HmacSha256(
      Buffer.from(hkdfSync('sha256', masterKey, Buffer.alloc(0), 'gateway token digest v1', 32)),
    );
  }

  /** `gcm1.<keyId>.<iv>.<ciphertext>.<tag>` (base64url parts). */
  seal(plain: string, context: string): string {
    const iv = nextIv();
    const cipher = createCipheriv('aes-256-gcm', this.encKey, iv);
    cipher.setAAD(Buffer.from(context, 'utf8'));
    // GCM is a stream mode: `final()` adds no byte (it computes the tag), so the ciphertext is `update`'s alone.
    const ct = cipher.update(plain, 'utf8');
    cipher.final();
    return `${PREFIX}.${this.keyId}.${iv.toString('base64url')}.${ct.toString('base64url')}.${cipher.getAuthTag().toString('base64url')}`;
  }

  /** Throws when the value was sealed under another key or for another context, or was altered. */
  open(sealed: string, context: string): string {
    const [prefix, keyId, iv, ct, tag] = sealed.split('.');
    if (prefix !== PREFIX || !iv || ct === undefined || !tag) throw new Error('not a sealed value');
    if (keyId !== this.keyId)
      throw new Error(
        `sealed under key ${keyId}, but the gateway holds key ${this.keyId} (TOKEN_ENCRYPTION_KEY differs)`,
      );
    const decipher = createDecipheriv('aes-256-gcm', this.encKey, Buffer.from(iv, 'base64url'));
    decipher.setAAD(Buffer.from(context, 'utf8'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    const plain = decipher.update(Buffer.from(ct, 'base64url'));
    decipher.final(); // checks the tag (throws when it differs); adds no byte in GCM
    return plain.toString('utf8');
  }

  /** A 32-byte key for another use (`info` names it), derived from the master key: the same on every replica. */
  derive(info: string): Buffer {
    return Buffer.from(hkdfSync('sha256', this.masterKey, Buffer.alloc(0), info, 32));
  }

  /** HMAC-SHA256 (hex) under a key derived from the master key. */
  digest(text: string): string {
    // The text's UTF-8 written once, in place after the pad.
    const inner = this.mac.inner(Buffer.byteLength(text, 'utf8'));
    inner.write(text, SHA256_BLOCK, 'utf8');
    return this.mac.hexOf(inner);
  }
}

/**
 * The key from TOKEN_ENCRYPTION_KEY, or from `<dataDir>/token-encryption.key`, created (mode 0600, synced to
 * disk before any token is sealed with it) on first start.
 */
export function loadSecretBox(options: {
  key: string | undefined;
  dataDir: string;
  shared: boolean;
  logger: Logger;
}): SecretBox {
  if (options.key) {
    const key = decodeKey(options.key);
    if (!key) throw new Error('TOKEN_ENCRYPTION_KEY is not a 32-byte key');
    return new SecretBox(key);
  }
  const file = path.join(options.dataDir, KEY_FILE_NAME);
  if (options.shared) {
    options.logger.warn(
      { file },
      'TOKEN_ENCRYPTION_KEY is unset while the store is PostgreSQL: this replica uses its own key file, so other replicas cannot read the tokens it stores, and a retry that reaches another replica reads as another request (request fingerprints are keyed with it); set the same TOKEN_ENCRYPTION_KEY on every replica',
    );
  }
  fs.mkdirSync(options.dataDir, { recursive: true });
  let created = false;
  if (!fs.existsSync(file)) {
    // Written to a temporary file and linked into place: a crash never leaves a half-written key behind,
    // and of two processes starting at once, one key wins.
    const tmp = `${file}.${process.pid}.tmp`;
    const fd = fs.openSync(tmp, 'w', 0o600);
    try {
      fs.writeSync(fd, randomBytes(32).toString('base64') + '\n');
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    try {
      fs.linkSync(tmp, file);
      created = true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    } finally {
      fs.unlinkSync(tmp);
    }
    syncDirectory(options.dataDir);
  }
  const mode = fs.statSync(file).mode & 0o777;
  if (mode & 0o077)
    options.logger.warn(
      { file, mode: mode.toString(8) },
      'the token encryption key file is readable by other users; chmod 600 it',
    );
  const key = decodeKey(fs.readFileSync(file, 'utf8'));
  if (!key)
    throw new Error(
      `${file} does not hold a 32-byte key (base64 or hex); restore it from a backup or set TOKEN_ENCRYPTION_KEY`,
    );
  const box = new SecretBox(key);
  if (created) options.logger.info({ file, keyId: box.keyId }, 'generated the token encryption key');
  return box;
}

function syncDirectory(dir: string): void {
  try {
    const fd = fs.openSync(dir, 'r');
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    // Some platforms cannot fsync a directory; the file itself is synced.
  }
}
