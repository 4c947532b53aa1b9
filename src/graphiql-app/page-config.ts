import { GRAPHIQL_APPROVAL_TAB } from '../server/approval-documents.js';
import type { GraphiqlExample, GraphiqlPageConfig } from '../server/graphiql.js';

/** The tab shape GraphiQL's `defaultTabs` prop takes (TabDefinition in @graphiql/react). */
export interface ExampleTab {
  query: string;
  variables?: string;
  headers?: string;
}

function isExample(value: unknown): value is GraphiqlExample {
  if (typeof value !== 'object' || value === null) return false;
  const { title, query, variables } = value as Record<string, unknown>;
  return (
    typeof title === 'string' && typeof query === 'string' && (variables === undefined || typeof variables === 'string')
  );
}

/** The injected config with safe defaults for anything missing or malformed. */
export function readPageConfig(injected: Partial<GraphiqlPageConfig> | undefined): GraphiqlPageConfig {
  const raw = injected ?? {};
  return {
    sandbox: raw.sandbox === true,
    apiKeyRequired: raw.apiKeyRequired === true,
    defaultQuery: typeof raw.defaultQuery === 'string' ? raw.defaultQuery : '',
    examples: Array.isArray(raw.examples) ? raw.examples.filter(isExample) : [],
  };
}

/**
 * The header editor's starting text. The header editor accepts JSONC, so when a key is
 * required the template is a comment the user fills in and uncomments.
 */
export function headersTemplate(config: GraphiqlPageConfig): string {
  return config.apiKeyRequired ? '{\n  // "Authorization": "Bearer <your API key>"\n}' : '';
}

/**
 * One tab per example. GraphiQL titles a tab after its operation name, so the example's
 * title goes into a comment on the first line where a reader of the tab sees it.
 */
export function tabsFromExamples(config: GraphiqlPageConfig): ExampleTab[] {
  const headers = headersTemplate(config);
  return config.examples.map((example) => ({
    query: `# ${example.title.replace(/\r?\n/g, ' ')}\n${example.query}`,
    ...(example.variables === undefined ? {} : { variables: example.variables }),
    ...(headers === '' ? {} : { headers }),
  }));
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The tab an approver opens from an agent's plan (`/graphql?approvePlan=<id>`, the link an MCP plan tool returns,
 * docs/decisions/060): the plan to read, and its approval to run, with the plan's id in the variables. Null without
 * a plan id in the page's query string. Its text is the gateway's own, which TRUSTED_DOCUMENTS=enforce admits as it is
 * (src/server/approval-documents.ts).
 */
export function approvalTab(search: string, config: GraphiqlPageConfig): ExampleTab | null {
  const planId = new URLSearchParams(search).get('approvePlan');
  if (planId === null || !UUID.test(planId)) return null;
  const headers = headersTemplate(config);
  return {
    query: GRAPHIQL_APPROVAL_TAB,
    variables: JSON.stringify({ id: planId.toLowerCase() }, null, 2),
    ...(headers === '' ? {} : { headers }),
  };
}
