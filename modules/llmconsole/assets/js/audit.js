// Audit: the changes made through the admin API (GET /llm/audit), newest
// first, filtered by the server (?actor= exactly, ?action= a part of it,
// ?model=, ?since=), a page at a time by the cursor each page gives.
import { h, table, empty } from './dom.js';
import { t, time } from './i18n.js';
import { api } from './api.js';

const PAGE = 50;
const SINCE = ['1h', '24h', '168h', ''];

// fieldsText says an entry's fields other than its model in short.
function fieldsText(fields) {
  return Object.entries(fields || {}).filter(([k]) => k !== 'model')
    .map(([k, v]) => `${k}=${v !== null && typeof v === 'object' ? JSON.stringify(v) : v}`).join(' · ');
}

function row(e) {
  const model = e.fields && e.fields.model !== undefined ? String(e.fields.model) : '';
  return h('tr', { 'data-audit': e.id, 'data-action': e.action },
    h('td', { class: 'nowrap' }, time(e.time)), h('td', { 'data-field': 'actor' }, e.actor),
    h('td', { 'data-field': 'action' }, e.action), h('td', { 'data-field': 'model' }, model || '–'),
    h('td', {}, e.node || '–'), h('td', { class: 'wrap' }, fieldsText(e.fields)));
}

// filterForm is the filters' form; changed is called with the query.
function filterForm(changed) {
  const input = (id, hint) => h('input', { id, type: 'search', placeholder: hint });
  const actor = input('audit-actor', 'token:root'), action = input('audit-action', 'model'), model = input('audit-model', 'chat');
  const since = h('select', { id: 'audit-since' }, SINCE.map((v) => h('option', { value: v, selected: v === '24h' }, t(`audit.since.${v || 'all'}`))));
  const f = h('form', { class: 'inline', id: 'audit-form' },
    h('label', { class: 'field' }, t('audit.actor'), actor), h('label', { class: 'field' }, t('audit.action'), action),
    h('label', { class: 'field' }, t('col.model'), model), h('label', { class: 'field' }, t('audit.since'), since),
    h('button', { type: 'submit', class: 'primary' }, t('audit.filter')));
  const query = () => {
    const q = new URLSearchParams({ limit: String(PAGE) });
    for (const [k, el] of [['actor', actor], ['action', action], ['model', model], ['since', since]]) if (el.value.trim()) q.set(k, el.value.trim());
    return q;
  };
  f.addEventListener('submit', (e) => { e.preventDefault(); changed(query()); });
  since.addEventListener('change', () => changed(query()));
  return { form: f, query };
}

export async function audit(root, app) {
  root.append(h('h1', {}, t('audit.title')), h('p', { class: 'muted' }, t('audit.help')));
  let cursors = ['']; // the cursor each page starts at, for Previous
  let page = 0;
  let base = null;
  let asked = 0;
  const info = h('p', { class: 'muted', id: 'audit-source' });
  const box = h('div', { id: 'audit-table' });
  const prev = h('button', { type: 'button', id: 'audit-prev' }, t('keys.prev'));
  const next = h('button', { type: 'button', id: 'audit-next' }, t('keys.next'));
  const filters = filterForm((q) => { base = q; cursors = ['']; page = 0; refresh().catch((e) => app.fail(e)); });
  base = filters.query();
  let current = { entries: [], next: '' };
  prev.addEventListener('click', () => { if (page > 0) { page--; refresh().catch((e) => app.fail(e)); } });
  next.addEventListener('click', () => {
    if (!current.next) return;
    cursors = cursors.slice(0, page + 1).concat(current.next);
    page++;
    refresh().catch((e) => app.fail(e));
  });
  root.append(h('div', { class: 'card' }, filters.form), h('div', { class: 'pager' }, prev, next, info), box);

  async function refresh() {
    const seq = ++asked;
    const q = new URLSearchParams(base);
    if (cursors[page]) q.set('cursor', cursors[page]);
    const got = await api('GET', `/llm/audit?${q}`);
    if (seq !== asked) return;
    current = got || { entries: [] };
    prev.disabled = page === 0;
    next.disabled = !current.next;
    info.textContent = t('audit.page', { page: page + 1, source: t(`audit.source.${current.source || 'storage'}`) }) + (current.warning ? ` — ${current.warning}` : '');
    const rows = (current.entries || []).map(row);
    const filtered = ['actor', 'action', 'model'].some((k) => base.get(k));
    box.replaceChildren(rows.length
      ? table(['col.time', 'audit.actor', 'col.action', 'col.model', 'col.node', 'audit.fields'].map((k) => h('th', {}, t(k))), rows)
      : empty(t(filtered ? 'audit.nomatch' : 'audit.empty')));
  }
  await refresh();
  // Only the first page moves: later pages stay as they were read.
  return { refresh: () => (page === 0 ? refresh() : Promise.resolve()), every: 10000 };
}
