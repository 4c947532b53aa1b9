// The GraphQL documents the gateway's own approval pages send: the approvals page (GET /approvals,
// src/server/approvals.ts) and GraphiQL's approval tab (`/graphql?approvePlan=<id>`, src/graphiql-app/page-config.ts).
// They are written here once and only here, because TRUSTED_DOCUMENTS=enforce admits them by their exact text beside
// the manifest's documents (src/server/trusted-documents.ts): a page that sent a text of its own would be refused, and
// under MCP_APPROVAL=approver no plan could then be approved at all. Plain strings, importing nothing: the GraphiQL
// bundle takes them into the browser too.

/** The fields of a plan the approvals page shows, in its list and for the plan its link opens. */
const PLAN_FIELDS = 'id app tool summary hash creations rateLimitPoints status expiresAt requests';

/** What the approvals page sends: its mutations and its read over HTTP POST, its live list over graphql-ws. */
export const APPROVALS_PAGE_DOCUMENTS = {
  /** Approves the plan as the person was shown it (`status`: the gateway refuses it when the plan changed since). */
  approve:
    'mutation($id: ID!, $status: AgentPlanStatus) { plan: approvePlan(planId: $id, status: $status) { id status } }',
  decline: 'mutation($id: ID!) { plan: declinePlan(planId: $id) { id status } }',
  /** The plan the page's `?plan=` link opens. */
  plan: `query($id: ID!) { agentPlan(id: $id) { ${PLAN_FIELDS} } }`,
  /** The live list of the plans this approver may approve. */
  pending: `subscription { pendingAgentPlansChanged { ${PLAN_FIELDS} } }`,
} as const;

/**
 * The text of GraphiQL's approval tab: the plan to read ("Plan") and its approval to run ("Approve"), with the plan's
 * id in the tab's variables. GraphiQL sends the whole tab, comments included, with the name of the operation to run.
 */
export const GRAPHIQL_APPROVAL_TAB = [
  '# An agent asks to run this plan. Run "Plan" to read what it would send, then "Approve" to let it run once',
  '# (it approves the plan only while it is PENDING, as "Plan" shows it: CONFLICT if it changed meanwhile).',
  'query Plan($id: ID!) {',
  '  agentPlan(id: $id) { id app tool status summary hash creations rateLimitPoints requests approvedBy approvalExpiresAt }',
  '}',
  '',
  'mutation Approve($id: ID!) {',
  '  approvePlan(planId: $id, status: PENDING) { id status approvedBy approvalExpiresAt hash }',
  '}',
].join('\n');

/** Every document the gateway's own pages send, as TRUSTED_DOCUMENTS=enforce admits them. */
export const GATEWAY_PAGE_DOCUMENTS: readonly string[] = [
  ...Object.values(APPROVALS_PAGE_DOCUMENTS),
  GRAPHIQL_APPROVAL_TAB,
];
