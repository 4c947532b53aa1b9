// GET /approvals: the page where people who hold an approve scope see agents' plans and approve or decline them
// (docs/decisions/060), without writing GraphQL. Self-contained and served by the gateway (no CDN, works offline):
// an HTML page and one script, no framework. It signs in with the same credential field as GraphiQL (the key or JWT
// kept in the tab's sessionStorage under GraphiQL's item, so one sign-in serves both pages), lists the plans this
// approver may approve live over graphql-ws (`pendingAgentPlansChanged`), and calls approvePlan (after a dialog that
// names the plan: the list moves as plans come and go) and declinePlan.
// Without a credential, or with one that cannot approve, it shows the sign-in field and why, never an error page.
import type { IncomingMessage, ServerResponse } from 'node:http';

import { APPROVALS_PAGE_DOCUMENTS } from './approval-documents.js';

/** The route of the page and of its script. */
interface ApprovalsRoute {
  method: 'GET';
  path: RegExp;
  name: string;
  handle(req: IncomingMessage, res: ServerResponse): void;
}

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Agent plans awaiting approval</title>
<style>
  :root { font-family: system-ui, sans-serif; color: #1b1b1b; background: #fafafa; }
  body { margin: 0 auto; max-width: 60rem; padding: 1rem; }
  h1 { font-size: 1.4rem; }
  form { display: flex; flex-wrap: wrap; gap: .5rem; align-items: end; margin-bottom: 1rem; }
  label { display: flex; flex-direction: column; font-weight: 600; flex: 1 1 16rem; }
  input { font: inherit; padding: .5rem; border: 1px solid #777; border-radius: 4px; }
  button { font: inherit; padding: .5rem 1rem; border-radius: 4px; border: 1px solid #333; background: #fff; cursor: pointer; min-height: 2.75rem; }
  button.approve { background: #0b6b2d; color: #fff; border-color: #0b6b2d; }
  button.decline { background: #a11; color: #fff; border-color: #a11; }
  button:focus-visible, input:focus-visible, summary:focus-visible { outline: 3px solid #1a5fb4; outline-offset: 2px; }
  #status { min-height: 1.5rem; }
  .plan { background: #fff; border: 1px solid #ccc; border-radius: 6px; padding: .75rem 1rem; margin: .75rem 0; }
  .plan.focus { border: 2px solid #1a5fb4; }
  .plan h2 { font-size: 1.1rem; margin: 0 0 .25rem; overflow-wrap: anywhere; }
  .meta { color: #444; font-size: .9rem; }
  pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f2f2f2; padding: .5rem; font-size: .85rem; }
  .actions { display: flex; gap: .5rem; flex-wrap: wrap; margin-top: .5rem; }
  dialog { max-width: min(56rem, 92vw); border: 2px solid #1a5fb4; border-radius: 6px; }
  dialog h2 { font-size: 1.1rem; margin-top: 0; }
  [hidden] { display: none !important; }
</style>
<script src="/approvals/app.js" defer></script>
</head>
<body>
<main>
<h1>Agent plans awaiting approval</h1>
<form id="signin" aria-describedby="why">
  <label for="credential">Your key or token
    <input id="credential" name="credential" type="password" autocomplete="off" spellcheck="false">
  </label>
  <button type="submit">Sign in</button>
  <button type="button" id="signout">Sign out</button>
</form>
<p id="why"></p>
<p id="status" role="status" aria-live="polite"></p>
<section id="focus" aria-label="The plan you opened"></section>
<section aria-labelledby="listhead">
  <h2 id="listhead" hidden>Plans you may approve</h2>
  <div id="plans"></div>
</section>
</main>
<dialog id="confirm" aria-labelledby="confirmhead">
  <h2 id="confirmhead"></h2>
  <p class="meta" id="confirmagain" hidden></p>
  <pre id="confirmsummary"></pre>
  <p class="meta" id="confirmhash"></p>
  <div class="actions">
    <button type="button" id="confirmno">Cancel</button>
    <button type="button" id="confirmyes" class="approve">Approve this plan</button>
  </div>
</dialog>
</body>
</html>
`;

// The page's script: plain browser JavaScript (no bundle step), the graphql-transport-ws protocol written out. Its
// documents are the gateway's own (src/server/approval-documents.ts), written in as they are admitted under
// TRUSTED_DOCUMENTS=enforce.
const SCRIPT = String.raw`'use strict';
(() => {
  const DOCUMENTS = ${JSON.stringify(APPROVALS_PAGE_DOCUMENTS)};
  const ITEM = 'gateway-graphiql:credential';
  const $ = (id) => document.getElementById(id);
  const credential = {
    get() { try { return sessionStorage.getItem(ITEM) || ''; } catch { return ''; } },
    set(v) { try { if (v) sessionStorage.setItem(ITEM, v); else sessionStorage.removeItem(ITEM); } catch {} },
  };
  // A plan id in any case names the same plan (as execute_plan and the GraphQL fields take it).
  const focusId = (new URLSearchParams(location.search).get('plan') || '').toLowerCase() || null;
  let socket = null;
  // The plans of the live list: the plan opened by ?plan= is shown there when it needs an approval, else above it.
  let listed = new Set();

  function say(text) { $('status').textContent = text; }
  function why(text) { $('why').textContent = text; }

  // A request the gateway did not answer (the network, a proxy's page) is an error like the gateway's own, never a throw
  // that would leave the page saying it is still at work.
  async function graphql(query, variables) {
    try {
      const res = await fetch('/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json', authorization: 'Bearer ' + credential.get() },
        body: JSON.stringify({ query, variables }),
      });
      return await res.json();
    } catch (e) {
      return { errors: [{ message: 'the gateway could not be reached or did not answer (' + (e && e.message) + '); nothing changed that this page knows of: read the plan again', extensions: { code: 'UNREACHABLE' } }] };
    }
  }

  // Characters a person would not see, or that change how the text around them reads (bidi overrides, zero-width
  // ones, separators): written as their escapes, so an agent's text can neither hide nor reorder what runs. The line
  // feeds of the indented JSON itself stay.
  const UNSEEN = /(?!\n)[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}]/gu;
  function shown(json) {
    return json.replace(UNSEEN, (c) =>
      [...Array(c.length).keys()].map((i) => '\\u' + c.charCodeAt(i).toString(16).padStart(4, '0')).join(''));
  }

  function text(tag, content, cls) {
    const el = document.createElement(tag);
    el.textContent = content;
    if (cls) el.className = cls;
    return el;
  }

  const AGAIN = 'Its last run\'s outcome is unknown: the requests may have been applied. Approved again, it runs ' +
    'again under the same idempotency keys: a cloud creation is made once (its service honours the key), but an ' +
    'identity check may be made a second time: check the identity service first.';

  function render(plan, into, focused) {
    const el = document.createElement('article');
    el.className = 'plan' + (focused ? ' focus' : '');
    el.dataset.planId = plan.id;
    const headingId = 'plan-' + plan.id;
    const h = text('h2', plan.app + ' asks to run ' + plan.tool);
    h.id = headingId;
    el.setAttribute('aria-labelledby', headingId);
    el.append(h);
    el.append(text('p', plan.summary.split('\n')[0]));
    el.append(text('p', plan.creations + ' upstream creation(s), ' + plan.rateLimitPoints + ' rate-limit point(s). ' +
      (plan.expiresAt ? 'Expires ' + new Date(plan.expiresAt).toLocaleString() + '.' : ''), 'meta'));
    const details = document.createElement('details');
    if (focused) details.open = true;
    details.append(text('summary', 'The exact requests and the hash'));
    details.append(text('p', 'hash ' + plan.hash, 'meta'));
    details.append(text('pre', shown(JSON.stringify(plan.requests, null, 2))));
    el.append(details);
    const unknown = plan.status === 'UNKNOWN';
    if (plan.status === 'PENDING' || plan.status === 'APPROVED' || unknown) {
      if (unknown) el.append(text('p', AGAIN, 'meta'));
      const actions = document.createElement('div');
      actions.className = 'actions';
      const approve = text('button', 'Approve', 'approve');
      approve.type = 'button';
      approve.setAttribute('aria-describedby', headingId);
      approve.addEventListener('click', () => ask(plan));
      actions.append(approve);
      // A plan that may have been applied already is never declined.
      if (!unknown) {
        const decline = text('button', 'Decline', 'decline');
        decline.type = 'button';
        decline.setAttribute('aria-describedby', headingId);
        decline.addEventListener('click', () => act('declinePlan', plan));
        actions.append(decline);
      }
      el.append(actions);
    } else {
      el.append(text('p', 'This plan is ' + plan.status.toLowerCase() + '.', 'meta'));
    }
    into.append(el);
  }

  // Approve asks first, in a dialog naming the plan with its summary and hash, Cancel focused: a click meant for
  // another card (the list moved under the pointer as a plan came or went) approves nothing the person did not read.
  let asking = null;
  function ask(plan) {
    asking = plan;
    // The question says what approving does: a plan whose run ended unknown runs again, and its summary reads as a
    // pending plan's, so a click the moving list put on its card must not pass for the first run's approval.
    const again = plan.status === 'UNKNOWN';
    $('confirmhead').textContent =
      'Approve the plan of ' + plan.app + ' to run ' + plan.tool + (again ? ' again?' : '?');
    $('confirmagain').textContent = again ? AGAIN : '';
    $('confirmagain').hidden = !again;
    $('confirmsummary').textContent = shown(plan.summary);
    $('confirmhash').textContent = 'Plan ' + plan.id + ', hash ' + plan.hash;
    $('confirm').showModal();
    $('confirmno').focus();
  }
  $('confirmno').addEventListener('click', () => { asking = null; $('confirm').close(); });
  $('confirmyes').addEventListener('click', () => {
    const plan = asking;
    asking = null;
    $('confirm').close();
    if (plan) act('approvePlan', plan);
  });

  async function act(mutation, plan) {
    say((mutation === 'approvePlan' ? 'Approving' : 'Declining') + ' the plan of ' + plan.app + '…');
    // An approval holds only for the status the person was shown: approving a pending plan runs it once, approving one
    // whose run ended unknown runs it again (the gateway refuses it when the plan changed meanwhile).
    const out = mutation === 'approvePlan'
      ? await graphql(DOCUMENTS.approve, { id: plan.id, status: plan.status })
      : await graphql(DOCUMENTS.decline, { id: plan.id });
    if (out.errors && out.errors.length) {
      const e = out.errors[0];
      say('Not done: ' + e.message + (e.extensions && e.extensions.code === 'NOT_FOUND' ? ' (it may have been executed, declined or changed)' : ''));
    } else {
      say('The plan of ' + plan.app + ' is ' + out.data.plan.status.toLowerCase() + '.');
    }
    await showFocus();
  }

  async function showFocus() {
    const into = $('focus');
    into.textContent = '';
    if (!focusId || !credential.get()) return;
    // Only a plan id is shown back: a link's other text would read as the page's own words.
    if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(focusId)) {
      into.append(text('p', 'This link names no plan (a plan id is a UUID).'));
      return;
    }
    const out = await graphql(DOCUMENTS.plan, { id: focusId });
    const plan = out.data && out.data.agentPlan;
    if (!plan && out.errors && out.errors.length) into.append(text('p', 'The plan ' + focusId + ' could not be read: ' + out.errors[0].message));
    else if (!plan) into.append(text('p', 'The plan ' + focusId + ' is not one you may approve, or it does not exist.'));
    else if (!listed.has(plan.id)) render(plan, into, true);
  }

  function list(plans) {
    const into = $('plans');
    // An update keeps what the person was doing: the focused button and the plans whose requests are open.
    const active = document.activeElement;
    const activePlan = active && active.closest && active.closest('#plans .plan');
    const keep = activePlan ? { id: activePlan.dataset.planId, cls: active.className, tag: active.tagName } : null;
    const open = new Set([...into.querySelectorAll('.plan details[open]')].map((d) => d.closest('.plan').dataset.planId));
    into.textContent = '';
    listed = new Set(plans.map((p) => p.id));
    if (focusId && listed.has(focusId)) $('focus').textContent = '';
    $('listhead').hidden = false;
    if (!plans.length) into.append(text('p', 'No plan waits for your approval.'));
    for (const plan of plans) render(plan, into, plan.id === focusId);
    for (const id of open) {
      const d = into.querySelector('.plan[data-plan-id="' + id + '"] details');
      if (d) d.open = true;
    }
    if (keep) {
      const card = into.querySelector('.plan[data-plan-id="' + keep.id + '"]');
      const again = card && [...card.querySelectorAll(keep.tag)].find((el) => el.className === keep.cls);
      if (again) again.focus();
    }
    const focused = into.querySelector('.focus');
    if (focused && !keep) focused.scrollIntoView({ block: 'nearest' });
  }

  function signedOut(reason) {
    if (socket) { socket.onclose = null; socket.close(); socket = null; }
    $('plans').textContent = '';
    $('focus').textContent = '';
    $('listhead').hidden = true;
    why(reason);
    $('credential').focus();
  }

  // The list refused: a credential that may not approve signs out; anything else (a rate limit, the database away, an
  // internal error) says so and tries again, the person still signed in.
  function refused(ws, error) {
    const code = error.extensions && error.extensions.code;
    if (code === 'UNAUTHENTICATED' || code === 'FORBIDDEN' || code === undefined)
      return signedOut('This key or token cannot approve plans: ' + error.message);
    if (socket === ws) { socket = null; ws.onclose = null; ws.close(); }
    say('The list could not be read (' + error.message + '); trying again…');
    setTimeout(connect, 2000);
  }

  function connect() {
    const key = credential.get();
    if (!key) return signedOut('Sign in with your key or token: it must hold cloud:approve (cloud plans) or identity:approve (identity plans).');
    why('');
    say('Connecting…');
    const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/graphql', 'graphql-transport-ws');
    socket = ws;
    ws.onopen = () => ws.send(JSON.stringify({ type: 'connection_init', payload: { authorization: 'Bearer ' + key } }));
    ws.onmessage = (m) => {
      const msg = JSON.parse(m.data);
      if (msg.type === 'connection_ack') {
        ws.send(JSON.stringify({ id: 'plans', type: 'subscribe', payload: { query: DOCUMENTS.pending } }));
      } else if (msg.type === 'ping') {
        ws.send(JSON.stringify({ type: 'pong' }));
      } else if (msg.type === 'next') {
        const errors = msg.payload.errors;
        if (errors && errors.length) return refused(ws, errors[0]);
        // Said once: later updates leave the last message (an approval's outcome) in place.
        if (!ws.listed) say('Signed in. The list updates by itself.');
        ws.listed = true;
        list(msg.payload.data.pendingAgentPlansChanged);
      } else if (msg.type === 'error') {
        refused(ws, msg.payload[0] || {});
      }
    };
    ws.onclose = (e) => {
      if (socket !== ws) return;
      socket = null;
      if (e.code === 4401 || e.code === 4403) signedOut('The gateway did not accept this key or token (' + (e.reason || e.code) + ').');
      else { say('Disconnected; reconnecting…'); setTimeout(connect, 2000); }
    };
    showFocus();
  }

  $('signin').addEventListener('submit', (e) => {
    e.preventDefault();
    credential.set($('credential').value.trim());
    $('credential').value = '';
    connect();
  });
  $('signout').addEventListener('click', () => { credential.set(''); signedOut('Signed out.'); });
  connect();
})();
`;

const HEADERS = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

export function approvalsRoutes(): ApprovalsRoute[] {
  const csp = [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'unsafe-inline'",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
  return [
    {
      method: 'GET',
      path: /^\/approvals\/?$/,
      name: 'approvals page',
      handle: (_req, res) => {
        res.writeHead(200, {
          ...HEADERS,
          'content-type': 'text/html; charset=utf-8',
          'content-security-policy': csp,
          // Opened from an agent's link: the page that opened it keeps no handle to send it to a look-alike sign-in.
          'cross-origin-opener-policy': 'same-origin',
        });
        res.end(PAGE);
      },
    },
    {
      method: 'GET',
      path: /^\/approvals\/app\.js$/,
      name: 'approvals page',
      handle: (_req, res) => {
        res.writeHead(200, { ...HEADERS, 'content-type': 'text/javascript; charset=utf-8' });
        res.end(SCRIPT);
      },
    },
  ];
}
