// Keys: a page of the list at a time, asked of the server (GET
// /llm/keys?limit=50&after=…&q=…), create with the secret shown once,
// rotate, revoke, and a key's own limits (PUT /llm/keys/<id>/limits).
import { h, table, armed } from './dom.js';
import { t, time, num } from './i18n.js';
import { api } from './api.js';

const PAGE = 50;
// The limits the page edits, in the order shown.
const LIMITS = ['requests_per_minute', 'tokens_per_minute', 'tokens_per_day', 'max_concurrent', 'max_output', 'budget'];

// limitsText says a key's own limits in short.
function limitsText(l) {
  if (!l) return t('keys.limits.none');
  const parts = LIMITS.filter((k) => l[k]).map((k) => t(`keys.limits.${k}.short`, { n: num(l[k], k === 'budget' ? 2 : 0) }));
  if (l.models && l.models.length) parts.push(t('keys.limits.models.short', { models: l.models.join(', ') }));
  return parts.length ? parts.join(' · ') : t('keys.limits.none');
}

export async function keys(root, app) {
  root.append(h('h1', {}, t('keys.title')));
  let afters = ['']; // the id each page starts after, for Previous
  let page = 0;
  let filter = '';
  let current = { keys: [], next: '', total: 0 };
  let asked = 0; // counts requests, so a late answer is dropped
  const secretBox = h('div', { id: 'key-secret' });

  function showSecret(k) {
    const copy = h('button', { type: 'button' }, t('keys.copy'));
    copy.addEventListener('click', async () => {
      try { await navigator.clipboard.writeText(k.secret); app.toast(t('keys.copied')); } catch (e) { app.toast(t('keys.nocopy'), true); }
    });
    const done = h('button', { type: 'button', id: 'key-secret-done' }, t('keys.stored'));
    done.addEventListener('click', () => secretBox.replaceChildren());
    secretBox.replaceChildren(h('div', { class: 'card' },
      h('p', {}, t('keys.secretonce', { id: k.id })),
      h('p', { class: 'secret', id: 'key-secret-value' }, k.secret),
      h('p', { class: 'actions' }, copy, done)));
  }

  if (app.may('keys')) {
    const project = h('input', { id: 'key-project', required: true, list: 'project-list', placeholder: 'org/team/project' });
    if (app.session.level === 'project' && app.session.tenant) project.value = app.session.tenant;
    const id = h('input', { id: 'key-id', placeholder: t('keys.optional') });
    // A tenant admin's keys are named by llmgw (key ids are one namespace
    // across tenants, and choosing one would tell whether it is taken).
    const idField = app.role() === 'tenant_admin' ? '' : h('label', { class: 'field' }, t('keys.id'), id);
    const f = h('form', { class: 'inline', id: 'key-create-form' },
      h('label', { class: 'field' }, t('keys.project'), project),
      idField,
      h('button', { type: 'submit', class: 'primary' }, t('keys.create')));
    f.addEventListener('submit', async (e) => {
      e.preventDefault();
      const body = { project: project.value.trim() };
      if (id.value.trim()) body.id = id.value.trim();
      try {
        const k = await api('POST', '/llm/keys', body);
        id.value = '';
        showSecret(k);
        await refresh(true);
      } catch (err) { app.fail(err); }
    });
    root.append(h('div', { class: 'card' }, h('h2', {}, t('keys.new')), f));
  }
  root.append(secretBox);

  const projects = h('datalist', { id: 'project-list' });
  const search = h('input', { type: 'search', id: 'key-filter', placeholder: t('keys.filter') });
  let debounce = 0;
  search.addEventListener('input', () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => { filter = search.value.trim(); afters = ['']; page = 0; refresh(true).catch((e) => app.fail(e)); }, 200);
  });
  const count = h('span', { class: 'muted', id: 'key-count' });
  const prev = h('button', { type: 'button', id: 'key-prev' }, t('keys.prev'));
  const next = h('button', { type: 'button', id: 'key-next' }, t('keys.next'));
  prev.addEventListener('click', () => { if (page > 0) { page--; refresh(true).catch((e) => app.fail(e)); } });
  next.addEventListener('click', () => {
    if (!current.next) return;
    afters = afters.slice(0, page + 1).concat(current.next);
    page++;
    refresh(true).catch((e) => app.fail(e));
  });
  const box = h('div', { id: 'keys-table' });
  root.append(projects, h('div', { class: 'pager' }, search, prev, next, count), box);

  // limitsForm edits a runtime key's own limits: empty fields are no limit.
  function limitsForm(k) {
    const l = k.limits || {};
    const inputs = LIMITS.map((name) => h('input', { type: 'number', min: 0, step: name === 'budget' ? 'any' : 1, class: 'small',
      'data-limit': name, value: l[name] || '', 'aria-label': t(`keys.limits.${name}`), placeholder: '–' }));
    const save = h('button', { type: 'submit', 'data-act': 'limits' }, t('keys.limits.save'));
    const f = h('form', { class: 'field-row' },
      LIMITS.map((name, i) => h('label', { class: 'field' }, t(`keys.limits.${name}`), inputs[i])), save);
    f.addEventListener('submit', async (e) => {
      e.preventDefault();
      const body = {};
      LIMITS.forEach((name, i) => { if (inputs[i].value !== '' && Number(inputs[i].value) > 0) body[name] = Number(inputs[i].value); });
      if (l.budget_period && body.budget) body.budget_period = l.budget_period;
      for (const keep of ['models', 'tools', 'tool_calls_per_minute', 'tool_calls_per_day']) if (l[keep]) body[keep] = l[keep];
      try {
        await api('PUT', `/llm/keys/${encodeURIComponent(k.id)}/limits`, body);
        app.toast(t('keys.limits.saved', { id: k.id }));
        await refresh(true);
      } catch (err) { app.fail(err); }
    });
    return h('details', { class: 'manage', 'data-key': k.id }, h('summary', {}, t('keys.limits')), f);
  }

  function row(k) {
    const acts = [];
    if (app.may('keys') && !k.revoked && k.source === 'runtime') {
      const rotate = armed(t('keys.rotate'), t('confirm'), async () => {
        try { showSecret(await api('POST', `/llm/keys/${encodeURIComponent(k.id)}/rotate`)); await refresh(true); } catch (e) { app.fail(e); }
      }, { 'data-act': 'rotate' });
      const revoke = armed(t('keys.revoke'), t('confirm'), async () => {
        try { await api('DELETE', `/llm/keys/${encodeURIComponent(k.id)}`); app.toast(t('keys.revoked', { id: k.id })); await refresh(true); } catch (e) { app.fail(e); }
      }, { 'data-act': 'revoke' });
      acts.push(rotate, revoke, limitsForm(k));
    }
    return h('tr', { 'data-key': k.id },
      h('td', {}, k.id), h('td', {}, k.project), h('td', {}, t(`keys.source.${k.source}`)),
      h('td', {}, time(k.created)),
      h('td', { 'data-field': 'limits' }, limitsText(k.limits)),
      h('td', {}, k.revoked ? h('span', { class: 'state failed' }, t('keys.revokedat', { time: time(k.revoked) })) : h('span', { class: 'state ready' }, t('keys.active'))),
      app.may('keys') ? h('td', {}, h('div', { class: 'actions' }, acts)) : null);
  }

  function draw() {
    const pages = Math.max(1, Math.ceil(current.total / PAGE));
    prev.disabled = page === 0;
    next.disabled = !current.next;
    count.textContent = t('keys.count', { n: current.total, page: page + 1, pages });
    const heads = ['col.key', 'col.project', 'col.source', 'col.created', 'col.limits', 'col.status'].concat(app.may('keys') ? ['col.actions'] : []).map((k) => h('th', {}, t(k)));
    const rows = current.keys.map(row);
    box.replaceChildren(rows.length ? table(heads, rows) : h('p', {}, t('keys.empty')));
    const ps = [...new Set(current.keys.map((k) => k.project))].sort();
    projects.replaceChildren(...ps.map((p) => h('option', { value: p })));
  }

  async function refresh(force) {
    const seq = ++asked;
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (afters[page]) q.set('after', afters[page]);
    if (filter) q.set('q', filter);
    const got = await api('GET', `/llm/keys?${q}`);
    if (seq !== asked) return;
    if (!got.keys.length && page > 0) { // the page emptied (keys revoked elsewhere): back to the first
      afters = [''];
      page = 0;
      return refresh(force);
    }
    current = got;
    if (force || !box.contains(document.activeElement)) draw();
  }
  await refresh(true);
  return { refresh: () => refresh(false), every: 15000 };
}
