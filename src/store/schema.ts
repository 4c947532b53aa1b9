import type { Generated } from 'kysely';

/**
 * The tables, as kysely sees them. Timestamps are epoch milliseconds (bigint in PostgreSQL, integer in
 * SQLite) and JSON is stored as text, so every query is portable between the two dialects.
 */
export interface Database {
  idempotency_records: IdempotencyRecordTable;
  resources: ResourceTable;
  events: EventTable;
  event_purge: EventPurgeTable;
  notification_tokens: NotificationTokenTable;
  verification_callbacks: VerificationCallbackTable;
  identification_callbacks: IdentificationCallbackTable;
  provisionings: ProvisioningTable;
  mobile_id_rejections: MobileIdRejectionTable;
  mobile_id_pending: MobileIdPendingTable;
  mobile_id_pending_owners: MobileIdPendingOwnerTable;
  app_activity: AppActivityTable;
  key_app_names: KeyAppNameTable;
  wildcard_app_names: WildcardAppNameTable;
  agent_plans: AgentPlanTable;
  agent_audit: AgentAuditTable;
}

/** Notifications acknowledged while their id_token could not be verified (src/mobile-id/pending.ts). */
export interface MobileIdPendingTable {
  /** The event log's dedupe key the notification will be stored under (owner and auth_req_id). */
  dedupe_key: string;
  auth_req_id: string;
  scope: string | null;
  /** Keyed digest of the normalised body: tells a repeat from another notification. */
  fingerprint: string;
  /** JSON of the stored notification, tokens sealed; its id_token checks are filled in once verified. */
  payload: string;
  meta: string;
  secrets_expire_at: number | null;
  received_at: number;
  attempts: number;
  next_attempt_at: number;
  /** A replica verifying the row holds it until then; another may take it over afterwards. */
  lease_until: number;
  /** Received plus EVENT_RETENTION: still unverifiable then, the notification is quarantined. */
  give_up_at: number;
}

/**
 * How many pending notifications each owner has (src/mobile-id/pending.ts): kept by triggers on
 * mobile_id_pending (migration 010), so the per-owner bound and each pass's list of owners are lookups, not counts.
 */
export interface MobileIdPendingOwnerTable {
  /** The owner's scope; '' for a shared (unbound) configured token, whose rows have a null scope. */
  owner: string;
  pending: number;
}

export interface IdempotencyRecordTable {
  /** Who may replay the record: a hash of the caller's API key, or `open` in sandbox mode. */
  scope: string;
  key: string;
  operation: string;
  /** sha256 of the canonical (RFC 8785) upstream request. */
  fingerprint: string;
  state: 'pending' | 'done' | 'unknown' | 'incomplete';
  /** JSON of the final result, secrets removed. */
  response: string | null;
  /** A pending record whose lease has passed belongs to a request that died; another may take it over. */
  lease_until: number;
  created_at: number;
  expires_at: number;
}

export interface ResourceTable {
  id: string;
  kind: string;
  project_id: string | null;
  parent_id: string | null;
  title: string | null;
  /** JSON of the non-secret input. */
  spec: string;
  /** JSON of the upstream's creation response, secrets removed. */
  response: string;
  idempotency_key: string | null;
  created_by: string;
  created_at: number;
}

export interface EventTable {
  seq: Generated<number>;
  /** `mobile-id` or `verification`. */
  kind: string;
  /** What subscribers ask for: the auth_req_id or the verification's external id. */
  key: string;
  /** Unique: a second delivery with the same dedupe key is a duplicate. */
  dedupe_key: string;
  /** sha256 of the canonical payload: tells a duplicate from a conflicting second notification. */
  fingerprint: string;
  payload: string;
  /** JSON of transport facts: request ids, content type, scope. */
  meta: string;
  /** API-key scope the event belongs to, when known (verification callbacks). */
  scope: string | null;
  received_at: number;
  expires_at: number;
  /** When short-lived secrets in the payload (a mobile-ID access token) expire and must be removed; null when none. */
  secrets_expire_at: number | null;
}

export interface NotificationTokenTable {
  /** sha256 of a client_notification_token issued by issueMobileIdNotificationToken. */
  token_hash: string;
  auth_req_id: string | null;
  created_by: string;
  created_at: number;
  expires_at: number;
}

export interface IdentificationCallbackTable {
  /** sha256 of the token in an identification completion callback address (one per API key and workflow). */
  token_hash: string;
  workflow_id: string;
  /** Scope of the API key the address belongs to: only its identifications are accepted there. */
  created_by: string;
  created_at: number;
}

export interface VerificationCallbackTable {
  /** sha256 of the random token in the callbackUrl handed to the verification service. */
  token_hash: string;
  external_id: string | null;
  created_by: string;
  created_at: number;
}

export interface ProvisioningTable {
  id: string;
  scope: string;
  idempotency_key: string;
  kind: string;
  state: string;
  /** JSON array of steps with their state and resource id. */
  steps: string;
  error: string | null;
  /** sha256 of the canonical mutation input: the same key with another input is refused. */
  fingerprint: string;
  /** Incremented on every change, so progress subscribers apply each change once, in order. */
  revision: number;
  created_at: number;
  updated_at: number;
}

/** Refused mobile-ID notifications, without secrets (src/mobile-id/quarantine.ts). */
export interface MobileIdRejectionTable {
  id: string;
  received_at: number;
  auth_req_id: string | null;
  http_status: number;
  error: string;
  reason: string;
  description: string;
  request_id: string | null;
  transaction_id: string | null;
  gateway_request_id: string;
  /** The scope of the app whose issued token authenticated the notification; null otherwise. */
  scope: string | null;
}

/**
 * One row (`id` 1): the highest sequence number the retention purge has deleted, on any replica (migration 016). A
 * cursor whose position lies below it may have lost events after it, whatever its date (src/events/replay.ts).
 */
export interface EventPurgeTable {
  id: number;
  /** Every event numbered above it is still in the log, unless it was never written; it only grows. */
  through_seq: number;
}

/**
 * Every app name ever configured with keys or listed by an identity provider's entry (src/store/key-app-names.ts):
 * rows are never deleted.
 */
export interface KeyAppNameTable {
  app: string;
  /** When a replica first recorded it (epoch ms). */
  first_configured_at: number;
}

/** A name an identity provider that accepts any app name (`*`) accepted (src/store/key-app-names.ts). */
export interface WildcardAppNameTable {
  app: string;
  /** When a replica first accepted it (epoch ms); for a name migration 017 found in app_activity, when it was seen. */
  first_accepted_at: number;
}

/** When each app was last seen, for the operator's list of apps (src/store/app-activity.ts). */
export interface AppActivityTable {
  /** The app's name (or a bare key's label): never a key. */
  app: string;
  /** How it authenticated: API_KEYS, OPERATOR_KEYS, APPS_FILE or JWT. */
  source: string;
  /** Its scopes when last seen, space-separated (a JWT's may change from token to token). */
  scopes: string;
  last_seen_at: number;
}

/** A plan an agent made over MCP (src/agents/plans.ts; its statements src/store/agent-plans.ts; docs/decisions/060). */
export interface AgentPlanTable {
  id: string;
  /** The owner scope of the app that made it. */
  owner: string;
  /** The app's name, as approvers see it. */
  app: string;
  tool: string;
  /** The tool's arguments, sealed. */
  variables: string;
  /** The GraphQL document the plan runs (its keys filled in), sealed: execute_plan runs this text, never a document id. */
  document: string | null;
  /** Its operation's name. */
  operation_name: string | null;
  /** The approve scopes' domains it needs, comma-separated (cloud, identity). */
  domains: string;
  /** The stored size of its variables, document, requests and summary: what counts against the app's bound. */
  bytes: number;
  /** When it stops being executable (and, a retention later, is purged); null for plans made before it was kept. */
  expires_at: number | null;
  hash: string;
  summary: string;
  /** The exact upstream requests (JSON, secrets masked); sealed for a plan of identity checks (they name a person). */
  requests: string;
  creations: number;
  points: number;
  /** pending, approved, executing, succeeded, failed, unknown or declined. */
  status: string;
  approved_by: string | null;
  approved_via: string | null;
  approved_hash: string | null;
  approval_expires_at: number | null;
  /** The execution's result (sealed JSON), replayed to a repeated execute_plan. */
  outcome: string | null;
  created_at: number;
  updated_at: number;
}

/** One plan, approval, refusal or execution of an agent's plan. */
export interface AgentAuditTable {
  id: string;
  at: number;
  plan_id: string;
  /** The app whose plan it is. */
  app: string;
  /** Who acted: the app, the person through it, or the approver. */
  actor: string;
  action: string;
  detail: string;
}
