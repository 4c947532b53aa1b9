// The configuration that reloads (docs/decisions/057): who may call (API keys, the apps file, the JWT providers and
// their keys) and which documents are trusted. SIGHUP and POST /admin/reload read the files again; every part is
// prepared first and swapped only when all are good, so a bad file leaves everything as it was.
import fs from 'node:fs';
import type { GraphQLSchema } from 'graphql';

import { readJwksFile } from '../auth/jwks-fetch.js';
import { listedAppNames, type JwtAuthConfig } from '../auth/jwt-config.js';
import { JwksKeys, JwtAuthenticator, looksLikeJwt, type KnownNames, type WildcardNames } from '../auth/jwt.js';
import { configuredApps, createAuthenticator, keyAppNames, type Authenticate } from '../auth/keys.js';
import { reloadConfig, type Config } from '../config/index.js';
import { ConfigError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';
import type { SecretBox } from '../secret.js';
import type { ReloadOutcome } from '../server/reload.js';
import { TrustedDocuments } from '../server/trusted-documents.js';
import type { ConfiguredApp } from '../services.js';
import type { RecordedNames } from '../store/key-app-names.js';

export type ReloadTrigger = 'SIGHUP' | 'POST /admin/reload';

/** A reload's reads of the files, when one of them was written meanwhile, are done again at most this many times. */
const READ_ATTEMPTS = 5;

/** A file a reload reads, and the variable that names it. */
interface ReadFile {
  readonly variable: string;
  readonly file: string;
}

/**
 * Each file's identity and last change (a replaced file, as an editor or a ConfigMap writes it, is another inode): the
 * same before the first read and after the last one, nothing was written while the files were read.
 */
function stamps(files: readonly ReadFile[]): Map<string, string> {
  return new Map(
    files.map(({ file }) => {
      try {
        const s = fs.statSync(file, { bigint: true });
        return [file, `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`];
      } catch (err) {
        return [file, `unreadable ${(err as NodeJS.ErrnoException).code ?? ''}`];
      }
    }),
  );
}

/** What a request reads once, when it starts: it finishes under it whatever a reload swaps meanwhile. */
interface Snapshot {
  readonly authenticate: Authenticate;
  readonly configured: ConfiguredApp[];
  readonly trusted: TrustedDocuments | undefined;
}

/**
 * One part a reload swaps: `prepare` reads and checks (throwing a ConfigError naming variable, file and line).
 * `appNames`: the names of the apps configured on the database, now or before; the reload adds every replica's to it
 * after the steps are prepared and before the swap, so nothing reads it before it is complete.
 */
type ReloadStep = (next: Config, appNames: ReadonlySet<string>) => () => void;

/**
 * The app names a configuration gives, to record in the database (src/store/key-app-names.ts): the apps configured
 * with keys, and the names the identity providers' entries list (not `*`). `*` takes none of them, now or after they
 * are removed, unless an entry lists it (docs/decisions/058).
 */
function appNamesToRecord(config: Config): string[] {
  return [...keyAppNames(config), ...listedAppNames(config.jwtAuth)];
}

/**
 * Records what a configuration needs recorded (appNamesToRecord, keyAppsToCheck), given the names, the key apps to
 * check, and the key apps an entry makes one app with the JWT app of their name.
 */
export type RecordNames = (
  names: readonly string[],
  keyApps: readonly string[],
  merged: readonly string[],
) => Promise<RecordedNames>;

/**
 * Records a configuration's app names (src/store/key-app-names.ts) and reads back every name configured on the
 * database; a key app whose name an identity provider's `*` accepted before stops it (a ConfigError, nothing recorded).
 */
export async function recordConfiguredNames(config: Config, record: RecordNames): Promise<ReadonlySet<string>> {
  const { check, merged } = keyAppsToCheck(config);
  const recorded = await record(appNamesToRecord(config), check, merged);
  if (recorded.taken !== undefined) throw takenNamesError(config, recorded.taken);
  return recorded.names;
}

/**
 * The key apps' names that may not be names `*` accepted before: what a JWT app accepted that way created is owned by
 * its name, and a key app of that name would read it. Not those an entry makes one app with the JWT app of their own
 * name (`shop=shop`, as AUTH_APPS says a key app and a JWT app are one), whose data they share on purpose: `merged`.
 */
function keyAppsToCheck(config: Config): { check: string[]; merged: string[] } {
  const one = new Set(
    (config.jwtAuth?.issuers ?? []).flatMap((issuer) =>
      issuer.apps.listed.flatMap((e) => (e.sameAsConfigured && e.claim === e.app ? [e.app] : [])),
    ),
  );
  const keyApps = keyAppNames(config);
  return { check: keyApps.filter((name) => !one.has(name)), merged: keyApps.filter((name) => one.has(name)) };
}

/** The refusal of key apps named as JWT apps `*` accepted before: each app by its name and variable, never a key. */
function takenNamesError(config: Config, taken: readonly string[]): ConfigError {
  const fromFile = new Set(config.appsFile.map((a) => a.name));
  const operators = new Set(config.operatorKeys.flatMap((k) => (k.name === null ? [] : [k.name])));
  const variableOf = (name: string) =>
    fromFile.has(name) ? 'GATEWAY_APPS_FILE' : operators.has(name) ? 'OPERATOR_API_KEYS' : 'GATEWAY_API_KEYS';
  const first = taken[0]!;
  const apps = taken.map((name) => `${name} (${variableOf(name)})`).join(', ');
  const entries = taken.map((name) => `${name}=${name}`).join(',');
  return new ConfigError(
    variableOf(first),
    `the app${taken.length > 1 ? 's' : ''} ${apps} configured with keys ${taken.length > 1 ? 'have names' : 'has the name'} of a JWT app an identity provider accepted through AUTH_APPS * before: what that app created is owned by its name, and the key app would read it. If they are one app, say so in AUTH_APPS (or the issuer's apps of AUTH_ISSUERS): ${entries}; otherwise give the key app another name`,
    variableOf(first) === 'GATEWAY_APPS_FILE' ? { file: config.appsFilePath!, line: null } : null,
  );
}

/**
 * The files a start reads and checks (the JWT providers' and the mobile identity service's JWKS files, the trusted
 * documents' manifest), read before anything is opened: a bad one stops the start (a ConfigError, exit 2) before the
 * database is created or migrated and before anything is written to DATA_DIR. Returns the trusted documents read,
 * which the LiveConfiguration then takes as they are (a manifest's documents are validated once).
 */
export function readStartFiles(config: Config, schema: GraphQLSchema): TrustedDocuments | undefined {
  const jwtAuth = config.jwtAuth;
  for (const issuer of jwtAuth?.issuers ?? [])
    if ('file' in issuer.jwks) readJwksFile(jwtAuth!.issuersFile ? 'AUTH_ISSUERS' : 'AUTH_JWKS_FILE', issuer.jwks.file);
  // The sandboxed mobile identity service signs with keys of its own: the file is read only for a real one.
  const mobileId = config.upstreams.mobileId;
  if (!mobileId.sandbox && mobileId.jwksFile) readJwksFile('MOBILEID_JWKS_FILE', mobileId.jwksFile);
  return loadTrusted(config, schema, undefined);
}

function loadTrusted(
  config: Config,
  schema: GraphQLSchema,
  previous: TrustedDocuments | undefined,
): TrustedDocuments | undefined {
  const { mode, manifest } = config.trustedDocuments;
  return mode === 'off'
    ? undefined
    : TrustedDocuments.load({ mode, manifest: manifest!, schema, introspection: config.introspection, previous });
}

export class LiveConfiguration {
  private snapshot: Snapshot;
  /** Each provider's keys: a JWKS URL's are kept across reloads (their cache and fetch schedule), a file's re-read. */
  private keysByUrl = new Map<string, JwksKeys>();
  /** What a reload prepares, in order, before it swaps any of it. */
  private readonly steps: ReloadStep[];
  /** Called after each reload that swapped the configuration (open connections authenticate again). */
  private readonly reloaded: Array<() => void> = [];
  private gen = 0;
  /** Reloads run one after another: one that read older files never swaps them in after a newer one. */
  private reloading: Promise<unknown> = Promise.resolve();
  /**
   * The names of every app configured on this gateway's database, with keys or listed by an identity provider's entry,
   * now or before (every replica's, as read at start and at each reload): `*` takes none of them unless an entry lists
   * it (docs/decisions/058). It only grows; each authenticator holds the set of its own configuration, as it holds the
   * rest of it.
   */
  private appNamesEver: ReadonlySet<string>;

  constructor(
    private readonly config: Config,
    private readonly deps: {
      logger: Logger;
      metrics: Metrics;
      box: SecretBox;
      schema: GraphQLSchema;
      now: () => number;
      /** MOBILEID_JWKS_FILE read again: the swap, or null when there is no such file. */
      prepareMobileIdKeys: () => (() => void) | null;
      /**
       * The names of apps configured on the database, now or before, recorded by the start with its own names
       * (appNamesToRecord, src/store/key-app-names.ts)...
       */
      appNames: ReadonlySet<string>;
      /** ...and what each reload records with its names (recordConfiguredNames): every name recorded so far. */
      recordAppNames: RecordNames;
      /** Where the names `*` accepts are recorded before they are served, across reloads (AcceptedNames). */
      wildcardNames?: WildcardNames;
      /** The trusted documents the start read before it opened anything (readStartFiles); unset: read now. */
      trusted?: TrustedDocuments | undefined;
    },
  ) {
    this.appNamesEver = new Set(deps.appNames);
    const keys = this.keysOf(config.jwtAuth);
    this.snapshot = {
      ...this.authOf(config, keys, this.appNamesEver),
      trusted: deps.trusted ?? this.loadTrusted(undefined),
    };
    this.keysInUse(keys);
    this.warn(config.jwtAuth);
    this.steps = [
      (next, appNames) => {
        const keys = this.keysOf(next.jwtAuth);
        const auth = this.authOf(next, keys, appNames);
        return () => {
          this.snapshot = { ...this.snapshot, ...auth };
          this.keysInUse(keys);
          this.warn(next.jwtAuth);
        };
      },
      () => {
        // The running manifest's documents that are unchanged are taken as they are: only new ones are validated
        // (TRUSTED_DOCUMENTS_RELOAD_REUSE=false: every one is).
        const trusted = this.loadTrusted(this.config.trustedDocuments.reloadReuse ? this.snapshot.trusted : undefined);
        return () => (this.snapshot = { ...this.snapshot, trusted });
      },
      () => this.deps.prepareMobileIdKeys() ?? (() => {}),
    ];
  }

  /** Authenticates with the running snapshot: each transport calls it once per request or connection. */
  readonly authenticate: Authenticate = (authorization, request) => this.snapshot.authenticate(authorization, request);

  /**
   * `authenticate` for a request answered once (POST and GET /graphql), which reads the trusted documents after it: a
   * verification that waits (a JWT whose keys are fetched) across a reload's swap is made again under the
   * configuration swapped in, so that the request reads the documents of the configuration its app was judged by,
   * never the new ones with the old apps. A connection's credential is judged again by HeldCredentials instead.
   */
  readonly authenticateRequest: Authenticate = (authorization, request) => {
    const snapshot = this.snapshot;
    const result = snapshot.authenticate(authorization, request);
    if (!(result instanceof Promise)) return result;
    return result.then((auth) =>
      this.snapshot === snapshot ? auth : this.authenticateRequest(authorization, request),
    );
  };

  /** The running configuration's number: one more after each reload that swapped it. */
  get generation(): number {
    return this.gen;
  }

  /** `listener` runs after every reload that swapped the configuration. */
  onReloaded(listener: () => void): void {
    this.reloaded.push(listener);
  }

  get configured(): ConfiguredApp[] {
    return this.snapshot.configured;
  }

  /** The trusted documents in force: those read at start-up, or at the last reload (MCP makes its tools of them). */
  readonly trustedDocuments = (): TrustedDocuments | undefined => this.snapshot.trusted;

  /** The admission of trusted documents, through the running manifest; undefined when TRUSTED_DOCUMENTS is off. */
  trustedAdmission(): { admit: TrustedDocuments['admit'] } | undefined {
    return this.snapshot.trusted
      ? { admit: (request, owner, runs) => this.snapshot.trusted!.admit(request, owner, runs) }
      : undefined;
  }

  /**
   * Reads the configuration files again: all of them are swapped in at once, or, when one is bad, none is (logged
   * with its variable, file and line, and counted in gateway_config_reloads_total{result="failed"}). The swap is
   * synchronous: no request sees half a reload. Before it, the app names the files give (appNamesToRecord) are
   * recorded in the database, and every replica's read back. Anything but a bad file (a ConfigError; a database that
   * does not answer) is counted as failed and thrown.
   */
  reload(trigger: ReloadTrigger): Promise<ReloadOutcome> {
    const run = this.reloading.then(() => this.reloadNow(trigger));
    this.reloading = run.catch(() => undefined);
    return run;
  }

  private async reloadNow(trigger: ReloadTrigger): Promise<ReloadOutcome> {
    let files = this.filesOf(this.config).map((f) => f.file);
    try {
      const { next, swaps, ever } = this.prepare();
      files = [...new Set([...files, ...this.filesOf(next).map((f) => f.file)])];
      // Recorded once every file is good, read back before the swap: another replica may have configured a name
      // since, and the swapped-in authenticator refuses it under `*` from its first request.
      for (const name of await recordConfiguredNames(next, this.deps.recordAppNames)) ever.add(name);
      this.appNamesEver = ever;
      for (const swap of swaps) swap();
      this.gen += 1;
      for (const listener of this.reloaded) listener();
      this.deps.metrics.configReloads.inc({ result: 'ok' });
      const trusted = this.snapshot.trusted;
      this.deps.logger.info(
        {
          trigger,
          files,
          // How many documents the manifest holds, and how many of them were new or changed (parsed and validated).
          ...(trusted ? { trustedDocuments: { documents: trusted.size, prepared: trusted.prepared } } : {}),
        },
        'configuration reloaded: requests from now on use the files as read now; operations in flight finish under the configuration they started with',
      );
      return { ok: true, files };
    } catch (err) {
      this.deps.metrics.configReloads.inc({ result: 'failed' });
      // Only a ConfigError names a bad file: anything else is unexpected, its message no answer's to show
      // (docs/contract.md, Error codes). It is thrown on, for the caller to log in full and answer as its own.
      if (!(err instanceof ConfigError)) throw err;
      const variable = err.variable;
      const where = err.place ?? { file: null, line: null };
      const message = err.message;
      this.deps.logger.error(
        { trigger, variable, file: where.file, line: where.line, reason: message },
        'configuration reload refused: a file is bad, the running configuration is kept',
      );
      return { ok: false, variable, file: where.file, line: where.line, message };
    }
  }

  /**
   * Reads every file and prepares every part, without swapping any. The files are read one after another: one written
   * meanwhile (the apps file read before, the manifest after) would make a configuration no one wrote, half of each
   * version. So each file's stamp is taken before the first read and after the last, and the files are read again
   * until none changed; files that keep changing are refused as a bad file is.
   */
  private prepare(): { next: Config; swaps: Array<() => void>; ever: Set<string> } {
    let before = stamps(this.filesOf(this.config));
    for (let attempt = 1; ; attempt++) {
      const next = reloadConfig(this.config);
      const ever = new Set(this.appNamesEver);
      const swaps = this.steps.map((prepare) => prepare(next, ever));
      const read = this.filesOf(next);
      const after = stamps(read);
      const changed = read.find(({ file }) => before.get(file) !== after.get(file));
      if (changed === undefined) return { next, swaps, ever };
      if (attempt === READ_ATTEMPTS)
        throw new ConfigError(
          changed.variable,
          `${changed.file} changed while the reload read the files, ${READ_ATTEMPTS} times in a row: reload again once the files are written`,
          { file: changed.file, line: null },
        );
      before = after;
    }
  }

  /** The files a reload reads again, each with its variable, for its log line, its answer and its check of changes. */
  private filesOf(config: Config): ReadFile[] {
    const jwtAuth = config.jwtAuth;
    return [
      { variable: 'GATEWAY_APPS_FILE', file: config.appsFilePath },
      { variable: 'AUTH_ISSUERS', file: jwtAuth?.issuersFile },
      ...(jwtAuth?.issuers ?? []).map((i) => ({
        variable: jwtAuth!.issuersFile ? 'AUTH_ISSUERS' : 'AUTH_JWKS_FILE',
        file: 'file' in i.jwks ? i.jwks.file : undefined,
      })),
      { variable: 'MOBILEID_JWKS_FILE', file: config.mobileId.jwksFile },
      { variable: 'TRUSTED_DOCUMENTS_MANIFEST', file: config.trustedDocuments.manifest },
    ].filter((f): f is ReadFile => typeof f.file === 'string');
  }

  private keysOf(jwtAuth: JwtAuthConfig | null): JwksKeys[] {
    const { now, logger } = this.deps;
    return (jwtAuth?.issuers ?? []).map((issuer) => {
      const source = issuer.jwks;
      const variable = jwtAuth!.issuersFile ? 'AUTH_ISSUERS' : 'AUTH_JWKS_FILE';
      return (
        ('url' in source ? this.keysByUrl.get(source.url) : undefined) ??
        new JwksKeys({ source, variable, refreshIntervalMs: jwtAuth!.refreshIntervalMs, now, logger })
      );
    });
  }

  /** The providers' keys from now on (at start, or swapped in by a reload): a file's keys passed over are logged now. */
  private keysInUse(keys: readonly JwksKeys[]): void {
    this.keysByUrl = new Map(keys.flatMap((k) => (k.url === null ? [] : [[k.url, k] as const])));
    for (const k of keys) {
      k.inForce();
      if (k.url !== null) void k.refresh();
    }
  }

  private authOf(
    cfg: Config,
    keys: readonly JwksKeys[],
    appNamesEver: KnownNames,
  ): Pick<Snapshot, 'authenticate' | 'configured'> {
    const { box, metrics, now } = this.deps;
    // A bare key's label in metrics and logs is a keyed digest: an unsalted hash of a key can be tested offline.
    const keyLabel = (key: string) => `key-${box.digest(`api key label\u0000${key}`).slice(0, 12)}`;
    const configured = configuredApps(cfg, keyLabel);
    // A JWT takes the name of an app configured with keys (or a bare key's label) only when AUTH_APPS says so.
    const jwt = cfg.jwtAuth
      ? new JwtAuthenticator(
          cfg.jwtAuth,
          keys,
          now,
          new Set(configured.map((a) => a.name)),
          new Map(cfg.appsFile.flatMap((a) => (a.approves ? [[a.name, a.approves] as const] : []))),
          (check) => metrics.jwtChecks.inc({ check }),
          (reason) => metrics.jwtRefusals.inc({ reason }),
          appNamesEver,
          this.deps.wildcardNames,
        )
      : null;
    return {
      authenticate: createAuthenticator(
        cfg,
        keyLabel,
        jwt ? { looks: looksLikeJwt, verify: (token, request) => jwt.authenticate(token, request) } : undefined,
      ),
      configured,
    };
  }

  private loadTrusted(previous: TrustedDocuments | undefined): TrustedDocuments | undefined {
    return loadTrusted(this.config, this.deps.schema, previous);
  }

  private warn(jwtAuth: JwtAuthConfig | null): void {
    for (const issuer of jwtAuth?.issuers ?? []) {
      const which = jwtAuth!.issuersFile ? `issuer ${issuer.issuer} of AUTH_ISSUERS: ` : '';
      if (issuer.scopePrefix === '') {
        this.deps.logger.warn(
          `${which}AUTH_SCOPE_PREFIX is empty: every scope word of a JWT that is spelled like a gateway scope (cloud:write, …) grants it, whatever client of the identity provider the token was issued for; set a prefix (such as gateway:) that only the gateway\'s client scopes carry`,
        );
      }
      if (issuer.apps.any && issuer.appClaim === null) {
        this.deps.logger.warn(
          `${which}AUTH_APPS accepts any app name (*) with the default app claims: a token without azp or client_id is named by its sub, so every user the identity provider signs a token for is an app; list the clients in AUTH_APPS, or set AUTH_APP_CLAIM`,
        );
      }
    }
  }
}
