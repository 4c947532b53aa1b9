import {
  createCipheriv,
  createDecipheriv,
  createHash,
  hash,
  hkdfSync,
  randomBytes,
  randomFillSync,
  timingSafeEqual,
  type Cipher,
} from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

import { decodeKey } from './config/index.js';
import type { Logger } from './logger.js';

const KEY_FILE_NAME = 'token-encryption.key';
/** A value sealed with AES-256-GCM, a cipher made per value (SEAL_KEPT_CIPHER=false, and every value before it). */
const GCM = 'gcm1';
/** A value sealed with AES-256-CTR and HMAC-SHA256, encrypt-then-MAC, with ciphers kept (docs/decisions/163). */
const CTR = 'ctr1';
/** The CTR format's IV (its first counter block) and its tag (the HMAC's first half), in bytes. */
const CTR_IV_BYTES = 16;
const CTR_TAG_BYTES = 16;
/** The GCM format's IV and tag, in bytes, as `seal` writes them and `open` requires them. */
const GCM_IV_BYTES = 12;
const GCM_TAG_BYTES = 16;
/** A base64url part of a sealed value (unpadded). */
const BASE64URL = /^[A-Za-z0-9_-]*$/;

/** Random IVs drawn from a pooled buffer: one getrandom call per 16 KiB of IVs instead of one per seal. */
const IV_POOL = Buffer.alloc(16 * 1024);
let ivOffset = IV_POOL.length;

function nextIv(bytes: number): Buffer {
  if (ivOffset + bytes > IV_POOL.length) {
    randomFillSync(IV_POOL);
    ivOffset = 0;
  }
  // A copy: the pool is refilled in place, and each IV is used once.
  const iv = Buffer.from(IV_POOL.subarray(ivOffset, ivOffset + bytes));
  ivOffset += bytes;
  return iv;
}

/**
 * AES-CTR of `data` from the initial counter block `iv` (16 bytes; the 128-bit block counts up, big-endian, as
 * OpenSSL's `aes-256-ctr` counts), with `blocks` a cipher of single blocks (ECB, no padding) under the key. The
 * same bytes as `createCipheriv('aes-256-ctr', key, iv)` gives (test/events/cursor-ctr.test.ts), without making a
 * cipher object per call.
 */
export function aesCtr(blocks: Cipher, iv: Buffer, data: Buffer): Buffer {
  const n = Math.ceil(data.length / 16);
  const counters = Buffer.allocUnsafe(n * 16);
  for (let i = 0; i < n; i++) {
    const at = i * 16;
    iv.copy(counters, at, 0, 16);
    let carry = i;
    for (let b = at + 15; carry > 0 && b >= at; b--) {
      const sum = counters[b]! + (carry % 256);
      counters[b] = sum % 256;
      carry = Math.floor(carry / 256) + (sum >= 256 ? 1 : 0);
    }
  }
  const stream = blocks.update(counters);
  const out = Buffer.allocUnsafe(data.length);
  for (let i = 0; i < data.length; i++) out[i] = data[i]! ^ stream[i]!;
  return out;
}

/** AES-256 on single blocks (ECB, no padding) under `key`, kept by its owner: the keystream of `aesCtr`. */
export function blockCipher(key: Buffer): Cipher {
  return createCipheriv('aes-256-ecb', key, null).setAutoPadding(false);
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
 * Seals what the gateway stores only sealed (mobile-ID tokens, rfm answers, identification links, callback bodies,
 * agent plans): each value encrypted under a key derived from the gateway secret, with its owner, record and field
 * as associated data, so that a ciphertext cannot be moved to another record or another owner's; and derives a keyed
 * digest for telling duplicates apart without a clear-text hash. See docs/decisions/005, 050 and 163.
 *
 * Two formats, both always read:
 * - `ctr1` (SEAL_KEPT_CIPHER=true, the default): AES-256-CTR from a random 128-bit IV, then HMAC-SHA256 of the IV,
 *   the associated data's length and bytes, and the ciphertext, its first 16 bytes the tag (encrypt-then-MAC, under
 *   two keys of their own). The block cipher and the HMAC's pads are made once for the box: a seal runs no cipher
 *   set-up, which a live notification finds cold (decision 163).
 * - `gcm1`: AES-256-GCM with a fresh 96-bit IV, a cipher made per value.
 */
export class SecretBox {
  /** First 8 hex digits of sha256(key): names the key in each sealed value, so a wrong key is diagnosable. */
  readonly keyId: string;
  private readonly encKey: Buffer;
  /** The keyed digest's HMAC, under a key derived from the master key. */
  private readonly mac: HmacSha256;
  /** The `ctr1` format's block cipher (its keystream) and its tag's HMAC, each under a key of its own. */
  private readonly ctrBlocks: Cipher;
  private readonly ctrMac: HmacSha256;
  private readonly kept: boolean;

  constructor(
    private readonly masterKey: Buffer,
    /** SEAL_KEPT_CIPHER: seal as `ctr1` (true, the default) or as `gcm1`. */
    options: { keptCipher?: boolean } = {},
  ) {
    if (masterKey.length !== 32) throw new Error('the token encryption key must be 32 bytes');
    this.keyId = createHash('sha256').update(masterKey).digest('hex').slice(0, 8);
    this.encKey = this.derive('gateway token encryption v1');
    this.mac = new HmacSha256(this.derive('gateway token digest v1'));
    this.ctrBlocks = blockCipher(this.derive('gateway seal aes-256-ctr v1'));
    this.ctrMac = new HmacSha256(this.derive('gateway seal hmac-sha256 v1'));
    this.kept = options.keptCipher ?? true;
  }

  /** `<format>.<keyId>.<iv>.<ciphertext>.<tag>` (base64url parts), the format `ctr1` or `gcm1`. */
  seal(plain: string, context: string): string {
    return this.kept ? this.sealCtr(plain, context) : this.sealGcm(plain, context);
  }

  private sealCtr(plain: string, context: string): string {
    const iv = nextIv(CTR_IV_BYTES);
    const ct = aesCtr(this.ctrBlocks, iv, Buffer.from(plain, 'utf8'));
    return `${CTR}.${this.keyId}.${iv.toString('base64url')}.${ct.toString('base64url')}.${this.ctrTag(iv, context, ct).toString('base64url')}`;
  }

  /**
   * The `ctr1` tag: HMAC-SHA256 of iv ‖ u32be(byte length of the context) ‖ context ‖ ciphertext, its first 16 bytes.
   * The IV has a fixed length and the context its length before it, so no two inputs read as one.
   */
  private ctrTag(iv: Buffer, context: string, ct: Buffer): Buffer {
    const aad = Buffer.byteLength(context, 'utf8');
    const inner = this.ctrMac.inner(CTR_IV_BYTES + 4 + aad + ct.length);
    let at = SHA256_BLOCK;
    at += iv.copy(inner, at);
    at = inner.writeUInt32BE(aad, at);
    at += inner.write(context, at, 'utf8');
    ct.copy(inner, at);
    return this.ctrMac.of(inner).subarray(0, CTR_TAG_BYTES);
  }

  private sealGcm(plain: string, context: string): string {
    const iv = nextIv(GCM_IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.encKey, iv, { authTagLength: GCM_TAG_BYTES });
    cipher.setAAD(Buffer.from(context, 'utf8'));
    // GCM is a stream mode: `final()` adds no byte (it computes the tag), so the ciphertext is `update`'s alone.
    const ct = cipher.update(plain, 'utf8');
    cipher.final();
    return `${GCM}.${this.keyId}.${iv.toString('base64url')}.${ct.toString('base64url')}.${cipher.getAuthTag().toString('base64url')}`;
  }

  /** Throws when the value was sealed under another key or for another context, or was altered. */
  open(sealed: string, context: string): string {
    const [format, keyId, iv, ct, tag, more] = sealed.split('.');
    // One text per value: Node's base64url decoder skips characters outside its alphabet, which are refused here.
    if (
      (format !== GCM && format !== CTR) ||
      !iv ||
      ct === undefined ||
      !tag ||
      more !== undefined ||
      !BASE64URL.test(iv) ||
      !BASE64URL.test(ct) ||
      !BASE64URL.test(tag)
    )
      throw new Error('not a sealed value');
    if (keyId !== this.keyId)
      throw new Error(
        `sealed under key ${keyId}, but the gateway holds key ${this.keyId} (TOKEN_ENCRYPTION_KEY differs)`,
      );
    if (format === CTR) {
      const ivBytes = Buffer.from(iv, 'base64url');
      const ctBytes = Buffer.from(ct, 'base64url');
      const tagBytes = Buffer.from(tag, 'base64url');
      // Checked before anything is deciphered: an altered value, or one sealed for another context, reads nothing.
      if (
        ivBytes.length !== CTR_IV_BYTES ||
        tagBytes.length !== CTR_TAG_BYTES ||
        !timingSafeEqual(tagBytes, this.ctrTag(ivBytes, context, ctBytes))
      )
        throw new Error('the sealed value was altered, or was sealed for another record');
      return aesCtr(this.ctrBlocks, ivBytes, ctBytes).toString('utf8');
    }
    // The tag's length is fixed at what `seal` writes (16 bytes), and the IV's at 12: Node takes a GCM tag as short as 4
    // bytes unless told its length, and a short tag is one an attacker who can write the store could forge by trying.
    const ivBytes = Buffer.from(iv, 'base64url');
    const tagBytes = Buffer.from(tag, 'base64url');
    if (ivBytes.length !== GCM_IV_BYTES || tagBytes.length !== GCM_TAG_BYTES)
      throw new Error('the sealed value was altered, or was sealed for another record');
    const decipher = createDecipheriv('aes-256-gcm', this.encKey, ivBytes, { authTagLength: GCM_TAG_BYTES });
    decipher.setAAD(Buffer.from(context, 'utf8'));
    decipher.setAuthTag(tagBytes);
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
  /** SEAL_KEPT_CIPHER (SecretBox). */
  keptCipher?: boolean;
  logger: Logger;
}): SecretBox {
  const sealing = { keptCipher: options.keptCipher ?? true };
  if (options.key) {
    const key = decodeKey(options.key);
    if (!key) throw new Error('TOKEN_ENCRYPTION_KEY is not a 32-byte key');
    return new SecretBox(key, sealing);
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
  const box = new SecretBox(key, sealing);
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
