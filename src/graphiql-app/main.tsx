// Side-effect import first: Monaco's workers must be configured before graphiql loads it.
import './monaco-workers.js';
import 'graphiql/style.css';

import { GraphiQL } from 'graphiql';
import { useState } from 'react';
import { createRoot } from 'react-dom/client';

import type { GraphiqlPageConfig } from '../server/graphiql.js';
import { sessionCredential } from './credential.js';
import { createGatewayFetcher, sameOriginEndpoints } from './fetcher.js';
import { approvalTab, headersTemplate, readPageConfig, tabsFromExamples } from './page-config.js';
import { namespacedLocalStorage } from './storage.js';

declare global {
  interface Window {
    /** Injected by src/server/graphiql.ts into the page. */
    __GATEWAY__?: Partial<GraphiqlPageConfig>;
  }
}

const config = readPageConfig(window.__GATEWAY__);
const credential = sessionCredential(window.sessionStorage);
const fetcher = createGatewayFetcher(sameOriginEndpoints(window.location), () => credential.get());
// An agent's plan to approve (`?approvePlan=<id>`): its tab opens first, whatever tabs the browser kept.
const approval = approvalTab(window.location.search, config);
const tabs = approval ? [approval, ...tabsFromExamples(config)] : tabsFromExamples(config);
const headers = headersTemplate(config);
const storage = namespacedLocalStorage(window.localStorage, JSON.stringify([config.defaultQuery, config.examples]));
// GraphiQL 5.4 opens the first of `defaultTabs` with its query but an empty variables editor
// (its provider falls back to tabs[0] for the query only), so hand it the variables too, but
// only while storage holds no tabs: otherwise GraphiQL would treat them as a new tab.
const firstVariables = storage.getItem('graphiql:tabState') === null ? tabs[0]?.variables : undefined;

/** The API key or JWT the page sends as `Authorization: Bearer …`, remembered while the browser tab is open. */
function CredentialField() {
  const [value, setValue] = useState(credential.get());
  return (
    <label
      className="gateway-credential"
      title="Sent as Authorization: Bearer … on every request and subscription; kept only while this browser tab is open. An Authorization header in the Headers editor wins."
    >
      <span>API key or JWT</span>
      <input
        type="password"
        autoComplete="off"
        spellCheck={false}
        data-testid="gateway-credential"
        placeholder={config.apiKeyRequired ? 'required' : 'optional (open sandbox)'}
        value={value}
        onChange={(e) => {
          setValue(e.target.value);
          credential.set(e.target.value);
        }}
      />
    </label>
  );
}

function App() {
  return (
    <GraphiQL
      fetcher={fetcher}
      defaultQuery={config.defaultQuery}
      defaultHeaders={headers}
      {...(tabs.length > 0 ? { defaultTabs: tabs } : {})}
      {...(approval
        ? { initialQuery: approval.query, initialVariables: approval.variables }
        : firstVariables === undefined
          ? {}
          : { initialVariables: firstVariables })}
      storage={storage}
      {...(config.apiKeyRequired ? { defaultEditorToolsVisibility: 'headers' as const } : {})}
      isHeadersEditorEnabled
      // Keys pasted into the header editor stay out of localStorage (its tabs here, its history: storage.ts).
      shouldPersistHeaders={false}
    >
      <GraphiQL.Logo>
        <span data-testid="gateway-logo">
          Gateway{config.sandbox ? <small className="gateway-sandbox-badge"> sandbox</small> : null}
        </span>
        <CredentialField />
      </GraphiQL.Logo>
    </GraphiQL>
  );
}

const container = document.getElementById('graphiql');
if (container === null) throw new Error('GraphiQL page: missing #graphiql element');
createRoot(container).render(<App />);
