// MCP servers (GET /llm/mcp/servers): every llm_mcp server with its
// transport, state, tools and tenants' sessions; enable and disable; and
// for a server that uses OAuth, whose tokens llmgw holds
// (GET …/authorization, never the tokens), the authorise button
// (POST …/authorize: the address to open in a browser) and forgetting a
// tenant's tokens (DELETE …/authorization?level=&name=).
import { h, table, armed, empty } from './dom.js';
import { t, time, num } from './i18n.js';
import { api, APIError } from './api.js';

const LEVELS = ['key', 'project', 'team', 'org'];
const path = (name, rest) => `/llm/mcp/servers/${encodeURIComponent(name)}${rest || ''}`;

// names is a list of names, folded away when long.
function names(list, what) {
  if (!list || !list.length) return '–';
  return h('details', { class: 'names', 'data-field': what },
    h('summary', {}, t(`mcp.${what}.count`, { n: num(list.length, 0) })), h('ul', {}, list.map((n) => h('li', {}, n))));
}

function stateOf(s) {
  if (!s.enabled) return h('span', { class: 'state stopped', 'data-state': 'disabled' }, t('mcp.disabled'));
  return h('span', { class: `state ${s.up ? 'ready' : 'starting'}`, 'data-state': s.up ? 'up' : 'down' }, t(s.up ? 'mcp.up' : 'mcp.down'));
}

function sessions(list) {
  if (!list || !list.length) return null;
  return h('div', { class: 'muted' }, list.map((x) => h('div', {}, `${x.level}:${x.name} `, h('span', { class: `state ${x.up ? 'ready' : 'starting'}` }, t(x.up ? 'mcp.up' : 'mcp.down')),
    x.last_error ? h('span', { class: 'error' }, ` ${x.last_error}`) : null)));
}

// serverRow is a server's line; an operator may switch it on and off.
function serverRow(s, app, done) {
  const acts = [];
  if (app.may('operate')) {
    const act = s.enabled ? 'disable' : 'enable';
    const b = h('button', { type: 'button', 'data-act': act }, t(`mcp.${act}`));
    b.addEventListener('click', async () => {
      b.disabled = true;
      try { await api('POST', path(s.name, `/${act}`)); app.toast(t(`mcp.${act}.done`, { name: s.name })); await done(); } catch (e) { app.fail(e); } finally { b.disabled = false; }
    });
    acts.push(b);
  }
  return h('tr', { 'data-server': s.name },
    h('td', {}, h('strong', {}, s.name), s.runtime ? h('div', { class: 'muted' }, t('mcp.runtime')) : null),
    h('td', {}, h('div', {}, s.transport), h('div', { class: 'muted wrap' }, s.target)),
    h('td', {}, stateOf(s), s.since ? h('div', { class: 'muted' }, t('mcp.since', { time: time(s.since) })) : null, sessions(s.tenants)),
    h('td', { class: 'num' }, num(s.restarts, 0)),
    h('td', {}, names(s.tools, 'tools'), names(s.resources, 'resources'), names(s.prompts, 'prompts')),
    h('td', { class: 'wrap' }, s.oauth ? h('div', {}, t(`mcp.oauth.${s.oauth}`)) : null, s.last_error ? h('div', { class: 'error' }, s.last_error) : null),
    app.may('operate') ? h('td', {}, h('div', { class: 'actions' }, acts)) : null);
}

// tokenRows are the tenants whose tokens llmgw holds, with Forget.
function tokenRows(name, st, app, done) {
  return (st.tenants || []).map((x) => {
    const who = x.name ? `${x.level}:${x.name}` : t('mcp.oauth.sharedtoken');
    const forget = app.may('operate') ? armed(t('mcp.oauth.forget'), t('confirm'), async () => {
      const q = x.name ? `?${new URLSearchParams({ level: x.level, name: x.name })}` : '';
      try { await api('DELETE', path(name, `/authorization${q}`)); app.toast(t('mcp.oauth.forgotten', { who })); await done(); } catch (e) { app.fail(e); }
    }, { 'data-act': 'forget' }) : null;
    return h('tr', { 'data-tenant': x.name ? `${x.level}:${x.name}` : 'shared' },
      h('td', {}, who),
      h('td', {}, h('span', { class: `state ${x.state === 'authorized' ? 'ready' : 'starting'}`, 'data-state': x.state }, t(`mcp.oauth.state.${x.state}`))),
      h('td', {}, x.expires_at ? time(x.expires_at) : '–'), h('td', {}, x.has_refresh_token ? t('yes') : t('no')),
      h('td', { class: 'num' }, num(x.refreshes, 0)), h('td', { class: 'error wrap' }, x.last_error || ''), forget ? h('td', {}, forget) : null);
  });
}

// authoriseForm starts OAuth for a tenant (or the shared token): the
// address to consent at is shown as a link to open, until settle sees
// the tenant authorised since.
function authoriseForm(name, shared, app, done) {
  const out = h('div', { 'data-field': 'authorize-result' });
  let pending = null; // {who, since} of the consent asked for
  const settle = (st) => {
    const got = pending && (st.tenants || []).find((x) => (x.name ? `${x.level}:${x.name}` : 'shared') === pending.who);
    if (!got || got.state !== 'authorized' || Date.parse(got.authorized_at) < pending.since - 5000) return;
    out.replaceChildren(h('p', {}, t('mcp.oauth.done', { who: pending.who })));
    pending = null;
  };
  const level = h('select', { 'data-field': 'level' }, LEVELS.map((l) => h('option', { value: l }, t(`mcp.level.${l}`))));
  const who = h('input', { 'data-field': 'name', required: true, placeholder: 'k1 · acme/research/alpha' });
  const parts = shared ? [] : [h('label', { class: 'field' }, t('mcp.oauth.level'), level), h('label', { class: 'field' }, t('mcp.oauth.name'), who)];
  const f = h('form', { class: 'inline', 'data-form': 'authorize' }, parts, h('button', { type: 'submit', class: 'primary', 'data-act': 'authorize' }, t('mcp.oauth.authorize')));
  f.addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = shared ? {} : { level: level.value, name: who.value.trim() };
    try {
      const r = await api('POST', path(name, '/authorize'), body);
      if (r.authorized) {
        out.replaceChildren(h('p', {}, t('mcp.oauth.done', { who: r.tenant })));
        await done();
        return;
      }
      if (!/^https?:\/\//i.test(r.authorization_url || '')) throw new Error(t('mcp.oauth.badurl'));
      pending = { who: r.tenant, since: Date.now() };
      out.replaceChildren(h('p', {}, t('mcp.oauth.open', { who: r.tenant, time: time(r.expires_at) })),
        h('p', {}, h('a', { href: r.authorization_url, target: '_blank', rel: 'noopener noreferrer', class: 'button primary', 'data-field': 'authorization-url' }, t('mcp.oauth.openlink'))));
    } catch (err) { app.fail(err); }
  });
  return { el: h('div', {}, f, out), settle };
}

// oauthCard is a server's OAuth part: kept across polls (its form keeps
// what was typed), its token table redrawn.
function oauthCard(s, app, done) {
  const state = h('div', { 'data-field': 'tokens' });
  const head = h('p', { class: 'muted' });
  const shared = s.oauth === 'shared';
  const form = app.may('operate') ? authoriseForm(s.name, shared, app, done) : null;
  const card = h('div', { class: 'card', 'data-oauth': s.name }, h('h2', {}, t('mcp.oauth.title', { name: s.name })), head, state,
    form ? form.el : null);
  async function update() {
    const st = await api('GET', path(s.name, '/authorization'));
    head.textContent = t('mcp.oauth.head', { grant: st.grant, tokens: t(`mcp.oauth.${st.tokens}`), issuer: st.issuer || '–', client: st.client_id || '–' });
    if (form) form.settle(st);
    const rows = tokenRows(s.name, st, app, done);
    const heads = ['mcp.oauth.tenant', 'col.state', 'mcp.oauth.expires', 'mcp.oauth.refresh', 'mcp.oauth.refreshes', 'mcp.oauth.error'].concat(app.may('operate') ? ['col.actions'] : []);
    state.replaceChildren(rows.length ? table(heads.map((k) => h('th', {}, t(k))), rows)
      : empty(t(shared ? 'mcp.oauth.noshared' : 'mcp.oauth.none'), app.may('operate') ? null : h('p', { class: 'muted' }, t('mcp.oauth.askoperator'))));
  }
  return { card, update };
}

export async function mcp(root, app) {
  root.append(h('h1', {}, t('mcp.title')), h('p', { class: 'muted' }, t('mcp.help')));
  const box = h('div', { id: 'mcp-servers' });
  const oauthBox = h('div', { id: 'mcp-oauth' });
  root.append(box, oauthBox);
  const cards = new Map(); // server → its OAuth card

  async function refresh() {
    let list;
    try {
      list = await api('GET', '/llm/mcp/servers');
    } catch (e) {
      if (!(e instanceof APIError) || e.status !== 404) throw e;
      list = [];
    }
    list = list || [];
    const heads = ['mcp.server', 'mcp.transport', 'col.state', 'mcp.restarts', 'mcp.offers', 'mcp.notes'].concat(app.may('operate') ? ['col.actions'] : []);
    box.replaceChildren(list.length ? table(heads.map((k) => h('th', {}, t(k))), list.map((s) => serverRow(s, app, refresh)))
      : empty(t('mcp.empty'), h('pre', { class: 'kv' }, 'route /mcp* {\n\tllm_quota\n\tllm_mcp {\n\t\tserver tickets {\n\t\t\turl https://mcp.example.com/mcp\n\t\t}\n\t}\n}')));
    const withOAuth = list.filter((s) => s.oauth);
    for (const name of [...cards.keys()]) if (!withOAuth.some((s) => s.name === name)) { cards.get(name).card.remove(); cards.delete(name); }
    for (const s of withOAuth) {
      if (!cards.has(s.name)) { cards.set(s.name, oauthCard(s, app, refresh)); oauthBox.append(cards.get(s.name).card); }
    }
    await Promise.all(withOAuth.map((s) => cards.get(s.name).update()));
  }
  await refresh();
  return { refresh, every: 5000 };
}
