// The console: sign-in, hash routing (#/models …), polling of the open
// page, language choice. Roles only hide what a person may not do; the
// server refuses it anyway.
import { h } from './dom.js';
import { t, setLang, pick, remember, LANGS, lang } from './i18n.js';
import { api, setCSRF, explain, APIError, forget, onReach } from './api.js';
import { signin } from './signin.js';
import { overview, nodes } from './overview.js';
import { models } from './models.js';
import { keys } from './keys.js';
import { usage } from './usage.js';
import { cache, mirror } from './store.js';
import { guardrails } from './guardrails.js';
import { knowledge } from './knowledge.js';
import { requests } from './requests.js';
import { playground } from './playground.js';
import { audit } from './audit.js';
import { mcp } from './mcp.js';
import { tenants } from './tenants.js';

// pages: id → [mount, who may see it]. A page's mount(root, app) builds it
// and returns {refresh, every, stop}: refresh is called every `every` ms,
// stop (if any) when another page is shown.
const all = () => true;
const staff = (r) => r !== 'tenant_admin';
const pages = {
  overview: [overview, staff],
  models: [models, all],
  keys: [keys, all],
  usage: [usage, all],
  requests: [requests, all],
  playground: [playground, (r) => r !== 'viewer'],
  cache: [cache, staff],
  guardrails: [guardrails, staff],
  knowledge: [knowledge, staff],
  mirror: [mirror, staff],
  nodes: [nodes, staff],
  tenants: [tenants, staff],
  mcp: [mcp, staff],
  audit: [audit, staff],
};

const app = {
  session: null,
  role() { return this.session ? this.session.role : ''; },
  // may says whether the role may make a kind of change (see perms.go).
  may(kind) {
    const r = this.role();
    if (kind === 'operate') return r === 'admin' || r === 'operator';
    if (kind === 'keys') return r === 'admin' || r === 'tenant_admin';
    return false;
  },
  toast(msg, isError) {
    const box = document.getElementById('toast');
    const d = h('div', { class: isError ? 'error' : '' }, msg);
    box.append(d);
    setTimeout(() => d.remove(), isError ? 9000 : 4000);
  },
  fail(err) {
    if (err instanceof APIError && err.status === 401 && app.session) {
      app.session = null;
      show('signin', t('signin.expired'));
      return;
    }
    if (err instanceof APIError && err.status === 0) return; // the banner says so, once
    app.toast(explain(err), true);
  },
  signedIn(sess) { return signedIn(sess); },
  changeLang(l) { return changeLang(l); },
};

let timer = 0;
let active = null;
let shown = 0; // counts page changes, so a slow page drawn late is dropped

function stopPolling() {
  clearTimeout(timer);
  timer = 0;
}

function schedule() {
  stopPolling();
  if (!active || !active.refresh) return;
  timer = setTimeout(async () => {
    const me = active;
    if (!document.hidden) {
      try { await me.refresh(); pageError(null); } catch (e) { if (me === active) polled(e); }
    }
    if (me === active) schedule();
  }, active.every || 4000);
}

// polled shows a failed poll: in the page, once, not as a toast per poll.
function polled(err) {
  if (err instanceof APIError && (err.status === 401 || err.status === 0)) app.fail(err);
  else pageError(err);
}

// pageError shows (or, given null, removes) the open page's error line.
function pageError(err) {
  const root = document.querySelector('#main > section');
  const line = document.getElementById('page-error');
  if (!err) { if (line) line.remove(); return; }
  const msg = explain(err);
  if (line) { line.textContent = msg; return; }
  if (root) root.prepend(h('p', { class: 'error banner-error', id: 'page-error', role: 'alert' }, msg));
}

// The gateway's reachability: while it does not answer, one banner
// stands over the page, the data on screen is greyed as stale, and the
// session route is tried every few seconds; when it answers again the
// banner goes, and a page that could not be drawn is drawn.
let probe = 0;
let broken = ''; // the page whose first data could not be read

function reachable(ok) {
  const bar = document.getElementById('offline');
  if (!bar || ok === bar.hidden) return;
  bar.hidden = ok;
  document.getElementById('main').classList.toggle('stale', !ok);
  clearInterval(probe);
  probe = 0;
  if (!ok) {
    probe = setInterval(() => { api('GET', '/llm/auth/session').catch(() => {}); }, 3000);
    return;
  }
  if (broken && app.session) show(broken);
}

function renderHeader() {
  const top = document.getElementById('top');
  top.hidden = !app.session;
  document.title = t('app.title');
  const nav = document.getElementById('nav');
  const cur = location.hash.replace(/^#\//, '');
  nav.replaceChildren(...Object.entries(pages)
    .filter(([, [, who]]) => app.session && who(app.role()))
    .map(([id]) => h('a', { href: `#/${id}`, class: id === cur ? 'active' : '', 'data-page': id }, t(`nav.${id}`))));
  document.getElementById('lang-label').textContent = t('lang.label');
  const sel = document.getElementById('lang');
  sel.replaceChildren(...LANGS.map((l) => h('option', { value: l, selected: l === lang() }, t(`lang.${l}`))));
  const who = document.getElementById('who');
  who.textContent = app.session ? t('who', { name: app.session.name || app.session.identity, role: t(`role.${app.session.role}`) }) : '';
  document.getElementById('signout').textContent = t('signout');
  document.getElementById('offline').textContent = t('state.offline');
}

async function show(id, message) {
  const seq = ++shown;
  stopPolling();
  if (active && active.stop) active.stop(); // e.g. requests the page no longer needs
  active = null;
  const main = document.getElementById('main');
  main.replaceChildren();
  if (!app.session || id === 'signin') {
    app.session = null;
    renderHeader();
    if (location.hash !== '#/signin') history.replaceState(null, '', '#/signin');
    const root = h('section', {});
    main.append(root); // detached, and so unseen, if another page follows first
    await signin(root, app, message);
    return;
  }
  const entry = pages[id] && pages[id][1](app.role()) ? pages[id] : null;
  if (!entry) {
    const first = app.role() === 'tenant_admin' ? 'models' : 'overview';
    location.hash = `#/${first}`;
    return;
  }
  renderHeader();
  const root = h('section', { id: `page-${id}` });
  const loading = h('p', { class: 'loading', id: 'page-loading', role: 'status' }, t('state.loading'));
  main.append(root, loading);
  const started = performance.now();
  let page = null;
  broken = '';
  try {
    page = await entry[0](root, app);
  } catch (e) {
    if (seq === shown) {
      if (e instanceof APIError && e.status === 0) broken = id;
      polled(e);
    }
  }
  loading.remove();
  if (seq !== shown) return; // another page was asked for meanwhile
  active = page;
  root.setAttribute('data-ready', String(Math.round(performance.now() - started)));
  schedule();
}

async function signedIn(sess) {
  forget();
  app.session = sess;
  setCSRF(sess.csrf_token);
  const l = pick(sess.lang);
  if (l !== lang()) await setLang(l);
  const target = location.hash.replace(/^#\//, '');
  if (pages[target]) await show(target);
  else location.hash = app.role() === 'tenant_admin' ? '#/models' : '#/overview';
}

async function changeLang(l) {
  await setLang(l);
  remember(l);
  if (app.session) {
    try { await api('POST', '/llm/auth/lang', { lang: l }); } catch (e) { /* kept in this browser */ }
    app.session.lang = l;
  }
  await show(app.session ? location.hash.replace(/^#\//, '') : 'signin');
}

async function signOut() {
  try { await api('POST', '/llm/auth/logout'); } catch (e) { /* the session may be gone already */ }
  setCSRF('');
  forget();
  app.session = null;
  await show('signin', t('signin.out'));
}

async function boot() {
  document.getElementById('main').before(h('div', { id: 'offline', class: 'banner', role: 'alert', hidden: true }));
  onReach(reachable);
  await setLang(pick(''));
  document.getElementById('lang').addEventListener('change', (e) => changeLang(e.target.value));
  document.getElementById('signout').addEventListener('click', signOut);
  window.addEventListener('hashchange', () => {
    const id = location.hash.replace(/^#\//, '');
    if (id === 'signin' && app.session) return;
    show(id);
  });
  document.addEventListener('visibilitychange', () => { if (!document.hidden && active) schedule(); });
  let sess = null;
  try { sess = await api('GET', '/llm/auth/session'); } catch (e) { sess = null; }
  if (sess && sess.role) await signedIn(sess);
  else await show('signin');
}

boot();
