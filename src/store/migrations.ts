import { sql, type Kysely, type Migration, type MigrationProvider } from 'kysely';

export type Dialect = 'sqlite' | 'postgres';

/**
 * Migrations are code, ordered by name, and written once for both dialects: the only dialect-specific
 * piece is the auto-incrementing event sequence.
 */
function migrations(dialect: Dialect): Record<string, Migration> {
  return {
    '001_initial': {
      async up(db: Kysely<any>) {
        await db.schema
          .createTable('idempotency_records')
          .addColumn('scope', 'text', (c) => c.notNull())
          .addColumn('key', 'text', (c) => c.notNull())
          .addColumn('operation', 'text', (c) => c.notNull())
          .addColumn('fingerprint', 'text', (c) => c.notNull())
          .addColumn('state', 'text', (c) => c.notNull())
          .addColumn('response', 'text')
          .addColumn('lease_until', 'bigint', (c) => c.notNull())
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('expires_at', 'bigint', (c) => c.notNull())
          .addPrimaryKeyConstraint('idempotency_records_pk', ['scope', 'key'])
          .execute();
        await db.schema
          .createIndex('idempotency_records_expires')
          .on('idempotency_records')
          .column('expires_at')
          .execute();

        await db.schema
          .createTable('resources')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('kind', 'text', (c) => c.notNull())
          .addColumn('project_id', 'text')
          .addColumn('parent_id', 'text')
          .addColumn('title', 'text')
          .addColumn('spec', 'text', (c) => c.notNull())
          .addColumn('response', 'text', (c) => c.notNull())
          .addColumn('idempotency_key', 'text')
          .addColumn('created_by', 'text', (c) => c.notNull())
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .execute();
        await db.schema.createIndex('resources_parent').on('resources').columns(['parent_id', 'kind']).execute();
        await db.schema.createIndex('resources_project').on('resources').columns(['project_id', 'kind']).execute();
        await db.schema.createIndex('resources_kind').on('resources').columns(['kind', 'created_at']).execute();

        await db.schema
          .createTable('events')
          .addColumn('seq', dialect === 'postgres' ? 'bigserial' : 'integer', (c) =>
            dialect === 'postgres' ? c.primaryKey() : c.primaryKey().autoIncrement(),
          )
          .addColumn('kind', 'text', (c) => c.notNull())
          .addColumn('key', 'text', (c) => c.notNull())
          .addColumn('dedupe_key', 'text', (c) => c.notNull().unique())
          .addColumn('fingerprint', 'text', (c) => c.notNull())
          .addColumn('payload', 'text', (c) => c.notNull())
          .addColumn('meta', 'text', (c) => c.notNull())
          .addColumn('scope', 'text')
          .addColumn('received_at', 'bigint', (c) => c.notNull())
          .addColumn('expires_at', 'bigint', (c) => c.notNull())
          .execute();
        await db.schema.createIndex('events_kind_key').on('events').columns(['kind', 'key', 'seq']).execute();
        await db.schema.createIndex('events_expires').on('events').column('expires_at').execute();

        await db.schema
          .createTable('notification_tokens')
          .addColumn('token_hash', 'text', (c) => c.primaryKey())
          .addColumn('auth_req_id', 'text')
          .addColumn('created_by', 'text', (c) => c.notNull())
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('expires_at', 'bigint', (c) => c.notNull())
          .execute();

        await db.schema
          .createTable('verification_callbacks')
          .addColumn('token_hash', 'text', (c) => c.primaryKey())
          .addColumn('external_id', 'text')
          .addColumn('created_by', 'text', (c) => c.notNull())
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .execute();

        await db.schema
          .createTable('provisionings')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('scope', 'text', (c) => c.notNull())
          .addColumn('idempotency_key', 'text', (c) => c.notNull())
          .addColumn('kind', 'text', (c) => c.notNull())
          .addColumn('state', 'text', (c) => c.notNull())
          .addColumn('steps', 'text', (c) => c.notNull())
          .addColumn('error', 'text')
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('updated_at', 'bigint', (c) => c.notNull())
          .execute();
        await db.schema
          .createIndex('provisionings_scope_key')
          .on('provisionings')
          .columns(['scope', 'idempotency_key'])
          .unique()
          .execute();
      },
    },
    // Lets the purge find expired mobile-ID access tokens by index instead of scanning payloads.
    '002_event_secrets_expiry': {
      async up(db: Kysely<any>) {
        await db.schema.alterTable('events').addColumn('secrets_expire_at', 'bigint').execute();
        await db.schema.createIndex('events_secrets_expire').on('events').column('secrets_expire_at').execute();
      },
    },
    // Composite provisioning: the fingerprint refuses a reused key, the revision orders progress events.
    '003_provisioning_fingerprint': {
      async up(db: Kysely<any>) {
        await db.schema
          .alterTable('provisionings')
          .addColumn('fingerprint', 'text', (c) => c.notNull().defaultTo(''))
          .execute();
        await db.schema
          .alterTable('provisionings')
          .addColumn('revision', 'integer', (c) => c.notNull().defaultTo(0))
          .execute();
      },
    },
    // Children of a parent and resources of a project, oldest first, straight from an index. On SQLite,
    // which has no statistics unless ANALYZE runs, the planner also guessed that `kind = ?` is selective
    // and read every network of every project through resources_kind to answer one project's networks
    // (decision 006, Measurements, steps 4 and 5, has the figures). Fixed
    // statistics describe the shape instead (kind: a dozen values; a parent or project: few rows), so the
    // plans no longer depend on the data (https://sqlite.org/lang_analyze.html, "Fixed results").
    '004_ledger_ordered_indexes': {
      async up(db: Kysely<any>) {
        await db.schema.dropIndex('resources_parent').execute();
        await db.schema.dropIndex('resources_project').execute();
        await db.schema
          .createIndex('resources_parent')
          .on('resources')
          .columns(['parent_id', 'kind', 'created_at', 'id'])
          .execute();
        await db.schema
          .createIndex('resources_project')
          .on('resources')
          .columns(['project_id', 'kind', 'created_at', 'id'])
          .execute();
        if (dialect === 'sqlite') {
          // ANALYZE of one small index creates sqlite_stat1; its rows for `resources` are then replaced.
          await sql`analyze resources_kind`.execute(db);
          await sql`delete from sqlite_stat1 where tbl = 'resources'`.execute(db);
          await sql`insert into sqlite_stat1 (tbl, idx, stat) values
            ('resources', 'sqlite_autoindex_resources_1', '1000000 1'),
            ('resources', 'resources_kind', '1000000 100000 2'),
            ('resources', 'resources_project', '1000000 100 20 2 1'),
            ('resources', 'resources_parent', '1000000 20 10 2 1')`.execute(db);
          await sql`analyze sqlite_schema`.execute(db);
        }
      },
    },
    // The quarantine of refused mobile-ID notifications (docs/decisions/016).
    '005_mobile_id_rejections': {
      async up(db: Kysely<any>) {
        await db.schema
          .createTable('mobile_id_rejections')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('received_at', 'bigint', (c) => c.notNull())
          .addColumn('auth_req_id', 'text')
          .addColumn('http_status', 'integer', (c) => c.notNull())
          .addColumn('error', 'text', (c) => c.notNull())
          .addColumn('reason', 'text', (c) => c.notNull())
          .addColumn('description', 'text', (c) => c.notNull())
          .addColumn('request_id', 'text')
          .addColumn('transaction_id', 'text')
          .addColumn('gateway_request_id', 'text', (c) => c.notNull())
          .addColumn('scope', 'text')
          .execute();
        await db.schema
          .createIndex('mobile_id_rejections_received')
          .on('mobile_id_rejections')
          .column('received_at')
          .execute();
        await db.schema
          .createIndex('mobile_id_rejections_auth_req_id')
          .on('mobile_id_rejections')
          .columns(['auth_req_id', 'received_at'])
          .execute();
      },
    },
    // Identification completion callbacks (docs/decisions/018): the hash of each address's token.
    '006_identification_callbacks': {
      async up(db: Kysely<any>) {
        await db.schema
          .createTable('identification_callbacks')
          .addColumn('token_hash', 'text', (c) => c.primaryKey())
          .addColumn('workflow_id', 'text', (c) => c.notNull())
          .addColumn('created_by', 'text', (c) => c.notNull())
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .execute();
      },
    },
    '007_mobile_id_pending': {
      async up(db: Kysely<any>) {
        await db.schema
          .createTable('mobile_id_pending')
          .addColumn('auth_req_id', 'text', (c) => c.primaryKey())
          .addColumn('scope', 'text')
          .addColumn('fingerprint', 'text', (c) => c.notNull())
          .addColumn('payload', 'text', (c) => c.notNull())
          .addColumn('meta', 'text', (c) => c.notNull())
          .addColumn('secrets_expire_at', 'bigint')
          .addColumn('received_at', 'bigint', (c) => c.notNull())
          .addColumn('attempts', 'integer', (c) => c.notNull())
          .addColumn('next_attempt_at', 'bigint', (c) => c.notNull())
          .addColumn('lease_until', 'bigint', (c) => c.notNull())
          .addColumn('give_up_at', 'bigint', (c) => c.notNull())
          .execute();
        await db.schema
          .createIndex('mobile_id_pending_due')
          .on('mobile_id_pending')
          .column('next_attempt_at')
          .execute();
      },
    },
    // Pending notifications are told apart per owner of the token that carried them, as the event log's dedupe
    // keys are (src/events/log.ts mobileIdDedupeKey): one app's notification never blocks another's.
    '008_mobile_id_pending_per_owner': {
      async up(db: Kysely<any>) {
        await db.schema
          .createTable('mobile_id_pending_v2')
          .addColumn('dedupe_key', 'text', (c) => c.primaryKey())
          .addColumn('auth_req_id', 'text', (c) => c.notNull())
          .addColumn('scope', 'text')
          .addColumn('fingerprint', 'text', (c) => c.notNull())
          .addColumn('payload', 'text', (c) => c.notNull())
          .addColumn('meta', 'text', (c) => c.notNull())
          .addColumn('secrets_expire_at', 'bigint')
          .addColumn('received_at', 'bigint', (c) => c.notNull())
          .addColumn('attempts', 'integer', (c) => c.notNull())
          .addColumn('next_attempt_at', 'bigint', (c) => c.notNull())
          .addColumn('lease_until', 'bigint', (c) => c.notNull())
          .addColumn('give_up_at', 'bigint', (c) => c.notNull())
          .execute();
        await sql`INSERT INTO mobile_id_pending_v2
          SELECT CASE WHEN scope IS NULL THEN 'mobile-id:' || auth_req_id ELSE 'mobile-id@' || scope || ':' || auth_req_id END,
                 auth_req_id, scope, fingerprint, payload, meta, secrets_expire_at, received_at, attempts, next_attempt_at, lease_until, give_up_at
          FROM mobile_id_pending`.execute(db);
        await db.schema.dropTable('mobile_id_pending').execute();
        await db.schema.alterTable('mobile_id_pending_v2').renameTo('mobile_id_pending').execute();
        await db.schema
          .createIndex('mobile_id_pending_due')
          .on('mobile_id_pending')
          .column('next_attempt_at')
          .execute();
      },
    },
    // The operator's list of apps (docs/decisions/046): when each was last seen, by every replica.
    '009_app_activity': {
      async up(db: Kysely<any>) {
        await db.schema
          .createTable('app_activity')
          .addColumn('app', 'text', (c) => c.primaryKey())
          .addColumn('source', 'text', (c) => c.notNull())
          .addColumn('scopes', 'text', (c) => c.notNull())
          .addColumn('last_seen_at', 'bigint', (c) => c.notNull())
          .execute();
      },
    },
    // Each pass over pending notifications is shared across owners, and each owner's pending rows are bounded
    // (src/mobile-id/pending.ts, docs/decisions/052): an index to take one owner's due rows in order, and a count per
    // owner that triggers keep exact in the statement that inserts or deletes a row.
    '010_mobile_id_pending_fair': {
      async up(db: Kysely<any>) {
        // The pass reads due rows per owner only: the index by due time alone has no reader left.
        await db.schema.dropIndex('mobile_id_pending_due').execute();
        await db.schema
          .createIndex('mobile_id_pending_owner_due')
          .on('mobile_id_pending')
          .columns(['scope', 'next_attempt_at'])
          .execute();
        await db.schema
          .createTable('mobile_id_pending_owners')
          .addColumn('owner', 'text', (c) => c.primaryKey())
          .addColumn('pending', 'integer', (c) => c.notNull())
          .execute();
        await sql`INSERT INTO mobile_id_pending_owners (owner, pending)
          SELECT COALESCE(scope, ''), COUNT(*) FROM mobile_id_pending GROUP BY COALESCE(scope, '')`.execute(db);
        if (dialect === 'postgres') {
          await sql`CREATE FUNCTION mobile_id_pending_count() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              IF TG_OP = 'INSERT' THEN
                INSERT INTO mobile_id_pending_owners (owner, pending) VALUES (COALESCE(NEW.scope, ''), 1)
                  ON CONFLICT (owner) DO UPDATE SET pending = mobile_id_pending_owners.pending + 1;
              ELSE
                UPDATE mobile_id_pending_owners SET pending = pending - 1 WHERE owner = COALESCE(OLD.scope, '');
              END IF;
              RETURN NULL;
            END $$`.execute(db);
          await sql`CREATE TRIGGER mobile_id_pending_count AFTER INSERT OR DELETE ON mobile_id_pending
            FOR EACH ROW EXECUTE PROCEDURE mobile_id_pending_count()`.execute(db);
        } else {
          await sql`CREATE TRIGGER mobile_id_pending_added AFTER INSERT ON mobile_id_pending BEGIN
              INSERT OR IGNORE INTO mobile_id_pending_owners (owner, pending) VALUES (COALESCE(NEW.scope, ''), 0);
              UPDATE mobile_id_pending_owners SET pending = pending + 1 WHERE owner = COALESCE(NEW.scope, '');
            END`.execute(db);
          await sql`CREATE TRIGGER mobile_id_pending_removed AFTER DELETE ON mobile_id_pending BEGIN
              UPDATE mobile_id_pending_owners SET pending = pending - 1 WHERE owner = COALESCE(OLD.scope, '');
            END`.execute(db);
        }
      },
    },
    // A query showed an identification callback address by writing its row; now a query writes nothing and the row is
    // written when an identification of the workflow is created (docs/decisions/051). Rows written by queries alone
    // (no identification of that owner and workflow) could never let a callback in: they go.
    '011_callback_addresses_of_identifications': {
      async up(db: Kysely<any>) {
        await sql`DELETE FROM identification_callbacks WHERE NOT EXISTS (
          SELECT 1 FROM resources r
          WHERE r.kind = 'identification' AND r.created_by = identification_callbacks.created_by AND r.title = identification_callbacks.workflow_id
        )`.execute(db);
      },
    },
    // Plans agents make over MCP and their approvals (docs/decisions/060), and the audit trail operators list: every
    // plan, approval, refusal and execution. The variables and the outcome are sealed (they may hold passwords).
    '012_agent_plans': {
      async up(db: Kysely<any>) {
        await db.schema
          .createTable('agent_plans')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('owner', 'text', (c) => c.notNull())
          .addColumn('app', 'text', (c) => c.notNull())
          .addColumn('tool', 'text', (c) => c.notNull())
          .addColumn('variables', 'text', (c) => c.notNull())
          .addColumn('hash', 'text', (c) => c.notNull())
          .addColumn('summary', 'text', (c) => c.notNull())
          .addColumn('requests', 'text', (c) => c.notNull())
          .addColumn('creations', 'integer', (c) => c.notNull())
          .addColumn('points', 'integer', (c) => c.notNull())
          .addColumn('status', 'text', (c) => c.notNull())
          .addColumn('approved_by', 'text')
          .addColumn('approved_via', 'text')
          .addColumn('approved_hash', 'text')
          .addColumn('approval_expires_at', 'bigint')
          .addColumn('outcome', 'text')
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('updated_at', 'bigint', (c) => c.notNull())
          .execute();
        await db.schema.createIndex('agent_plans_status').on('agent_plans').columns(['status', 'created_at']).execute();
        await db.schema
          .createTable('agent_audit')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('at', 'bigint', (c) => c.notNull())
          .addColumn('plan_id', 'text', (c) => c.notNull())
          .addColumn('app', 'text', (c) => c.notNull())
          .addColumn('actor', 'text', (c) => c.notNull())
          .addColumn('action', 'text', (c) => c.notNull())
          .addColumn('detail', 'text', (c) => c.notNull())
          .execute();
        await db.schema.createIndex('agent_audit_at').on('agent_audit').columns(['at']).execute();
        await db.schema.createIndex('agent_audit_plan').on('agent_audit').columns(['plan_id', 'at']).execute();
      },
    },
    // A plan binds the exact document it runs (execute_plan never resolves a trusted document's id again), the approve
    // scopes it needs, its size (bounded per app) and its expiry (purged a retention later): docs/decisions/060.
    '013_agent_plans_bind_their_document': {
      async up(db: Kysely<any>) {
        await db.schema.alterTable('agent_plans').addColumn('document', 'text').execute();
        await db.schema.alterTable('agent_plans').addColumn('operation_name', 'text').execute();
        await db.schema
          .alterTable('agent_plans')
          .addColumn('domains', 'text', (c) => c.notNull().defaultTo('cloud'))
          .execute();
        await db.schema
          .alterTable('agent_plans')
          .addColumn('bytes', 'integer', (c) => c.notNull().defaultTo(0))
          .execute();
        await db.schema.alterTable('agent_plans').addColumn('expires_at', 'bigint').execute();
        await db.schema.createIndex('agent_plans_owner').on('agent_plans').columns(['owner', 'status']).execute();
      },
    },
    // One unique index on events (kind, key, dedupe_key) in place of the inline UNIQUE on dedupe_key and of
    // events_kind_key (kind, key, seq): one random-key index entry per appended event instead of two
    // (docs/decisions/079). Every dedupe key names its kind and key (src/events/log.ts), so the index refuses the same
    // rows. SQLite cannot drop a column's UNIQUE, so the table is copied once, in one transaction, with its
    // AUTOINCREMENT high-water mark: a number burnt or purged before is never given again. PostgreSQL keeps the
    // column's constraint for now: the previous release's replicas, still serving during a rolling update, name it
    // as their insert's conflict target.
    '014_events_one_unique_index': {
      async up(db: Kysely<any>) {
        if (dialect === 'postgres') {
          await sql`create unique index events_kind_key_dedupe on events (kind, key, dedupe_key)`.execute(db);
          await db.schema.dropIndex('events_kind_key').execute();
          return;
        }
        await db.transaction().execute(async (trx) => {
          // Kysely records a SQLite migration after its transaction: a restart in between finds the copy made.
          const { rows: done } = await sql`select 1 from sqlite_schema
            where type = 'index' and name = 'events_kind_key_dedupe'`.execute(trx);
          if (done.length > 0) return;
          const { rows: sequence } = await sql<{ seq: number }>`select seq from sqlite_sequence
            where name = 'events'`.execute(trx);
          await trx.schema
            .createTable('events_rebuilt')
            .addColumn('seq', 'integer', (c) => c.primaryKey().autoIncrement())
            .addColumn('kind', 'text', (c) => c.notNull())
            .addColumn('key', 'text', (c) => c.notNull())
            .addColumn('dedupe_key', 'text', (c) => c.notNull())
            .addColumn('fingerprint', 'text', (c) => c.notNull())
            .addColumn('payload', 'text', (c) => c.notNull())
            .addColumn('meta', 'text', (c) => c.notNull())
            .addColumn('scope', 'text')
            .addColumn('received_at', 'bigint', (c) => c.notNull())
            .addColumn('expires_at', 'bigint', (c) => c.notNull())
            .addColumn('secrets_expire_at', 'bigint')
            .execute();
          const columns = sql.raw(
            'seq, kind, key, dedupe_key, fingerprint, payload, meta, scope, received_at, expires_at, secrets_expire_at',
          );
          await sql`insert into events_rebuilt (${columns}) select ${columns} from events order by seq`.execute(trx);
          await trx.schema.dropTable('events').execute();
          await trx.schema.alterTable('events_rebuilt').renameTo('events').execute();
          await trx.schema
            .createIndex('events_kind_key_dedupe')
            .on('events')
            .columns(['kind', 'key', 'dedupe_key'])
            .unique()
            .execute();
          await trx.schema.createIndex('events_expires').on('events').column('expires_at').execute();
          await trx.schema.createIndex('events_secrets_expire').on('events').column('secrets_expire_at').execute();
          const highest = Number(sequence[0]?.seq ?? 0);
          await sql`delete from sqlite_sequence where name = 'events'`.execute(trx);
          await sql`insert into sqlite_sequence (name, seq)
            select 'events', max(${highest}, coalesce(max(seq), 0)) from events`.execute(trx);
        });
      },
    },
    // The name of every app ever configured with keys on this database, and (same table, src/store/key-app-names.ts)
    // of every name an identity provider's entry listed (docs/decisions/058): an identity provider that accepts any
    // app name (`*`) never takes one, even after the app is removed, since its data is owned by the name.
    '015_key_app_names': {
      async up(db: Kysely<any>) {
        await db.schema
          .createTable('key_app_names')
          .addColumn('app', 'text', (c) => c.primaryKey())
          .addColumn('first_configured_at', 'bigint', (c) => c.notNull())
          .execute();
      },
    },
    // The purge's watermark: the highest sequence number it has deleted, where every replica reads it. A cursor is
    // dated, but an event is purged by the expiry stamped on it when it was stored, under the EVENT_RETENTION of
    // that time and replica: a cursor young enough for today's retention may still lie before events already deleted.
    // What earlier purges deleted is not known; what they left is: the numbers below the oldest stored event (or,
    // with none stored, every number the log has given out) are taken as purged.
    '016_event_purge_watermark': {
      async up(db: Kysely<any>) {
        await db.schema
          .createTable('event_purge')
          .addColumn('id', 'integer', (c) => c.primaryKey())
          .addColumn('through_seq', 'bigint', (c) => c.notNull())
          .execute();
        const given =
          dialect === 'postgres'
            ? sql`(select case when is_called then last_value else 0 end from events_seq_seq)`
            : sql`(select seq from sqlite_sequence where name = 'events')`;
        await sql`insert into event_purge (id, through_seq)
          select 1, coalesce((select min(seq) - 1 from events), ${given}, 0)`.execute(db);
      },
    },
    // The names an identity provider that accepts any app name (`*`) has accepted (src/store/key-app-names.ts): what
    // such an app created is owned by its name, so a key app configured later under that name would read it. Filled
    // from what the operator's list of apps knows of JWT apps (`app_activity`: rows `jwt/<name>`, and the rows a JWT
    // app wrote under its bare name before those), which does not tell `*` from a listed entry: every JWT app seen.
    '017_wildcard_app_names': {
      async up(db: Kysely<any>) {
        await db.schema
          .createTable('wildcard_app_names')
          .addColumn('app', 'text', (c) => c.primaryKey())
          .addColumn('first_accepted_at', 'bigint', (c) => c.notNull())
          .execute();
        await sql`insert into wildcard_app_names (app, first_accepted_at)
          select name, min(last_seen_at) from (
            select substr(app, 5) as name, last_seen_at from app_activity where app like 'jwt/%'
            union all
            select app as name, last_seen_at from app_activity where source = 'JWT' and app not like 'jwt/%'
          ) as seen
          where name <> ''
          group by name`.execute(db);
      },
    },
  };
}

export function migrationProvider(dialect: Dialect): MigrationProvider {
  return { getMigrations: async () => migrations(dialect) };
}
