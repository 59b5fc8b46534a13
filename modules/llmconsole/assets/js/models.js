// Models: state, replicas and their nodes, reasons (an outside provider
// failing its health check says why), canary; add (a form with the chosen
// engine's options, secrets in password fields, or pasted JSON/YAML, the
// body of POST /llm/models), test connection, scale, stop/start, retry now (a failed model), remove; in a model's "Manage" panel: its canary share, a restart
// without downtime, and its registry updates and rollback.
import { h, table, armed } from './dom.js';
import { t, num } from './i18n.js';
import { api, explain } from './api.js';
import { parseYAML } from './yaml.js';

// engineFields draws the declared options of the chosen engine as
// fields (secrets as password fields, never filled from the gateway) and
// its example model, which fills the paste form.
function engineFields(e, box, example, paste) {
  const opts = (e && e.options || []).filter((o) => !o.name.endsWith('*'));
  box.replaceChildren(...opts.map((o) => {
    const input = h('input', { id: `model-opt-${o.name}`, 'data-option': o.name, type: o.secret ? 'password' : 'text',
      autocomplete: o.secret ? 'new-password' : 'off', required: !!o.required, placeholder: o.example || '' });
    return h('label', { class: 'field option' }, o.required ? `${o.name} *` : o.name, input,
      o.secret ? h('span', { class: 'muted' }, t('models.option.secret')) : null,
      o.description ? h('span', { class: 'muted help' }, o.description) : null);
  }));
  if (e && e.error) box.append(h('p', { class: 'muted', 'data-field': 'engine-error' }, e.error));
  const use = h('button', { type: 'button', 'data-act': 'use-example' }, t('models.example.use'));
  use.addEventListener('click', () => { paste.value = e.example; paste.focus(); });
  example.replaceChildren(...(e && e.example ? [h('p', { class: 'muted' }, t('models.example', { engine: e.type })),
    h('pre', { 'data-field': 'engine-example' }, e.example), use] : []));
}

function addForm(app, done) {
  const name = h('input', { name: 'name', id: 'model-name', required: true });
  const engine = h('input', { name: 'engine', id: 'model-engine', list: 'engine-list', required: true, autocomplete: 'off' });
  const source = h('input', { name: 'source', id: 'model-source' });
  const min = h('input', { name: 'min', id: 'model-min', type: 'number', min: 0, value: 1, class: 'small' });
  const max = h('input', { name: 'max', id: 'model-max', type: 'number', min: 0, value: 1, class: 'small' });
  const list = h('datalist', { id: 'engine-list' });
  const options = h('div', { id: 'model-options', class: 'options' });
  const example = h('div', { id: 'model-example' });
  const text = h('textarea', { id: 'model-body', spellcheck: 'false', placeholder: 'name: chat\nengine: sim\nscaling:\n  min: 1' });
  let engines = [];
  let drawn = '';
  const chosen = () => {
    const e = engines.find((x) => x.type === engine.value.trim());
    if ((e ? e.type : '') === drawn) return;
    drawn = e ? e.type : '';
    engineFields(e, options, example, text);
  };
  engine.addEventListener('input', chosen);
  engine.addEventListener('change', chosen);
  api('GET', '/llm/engines').then((es) => {
    engines = es || [];
    list.replaceChildren(...engines.map((e) => h('option', { value: e.type }, e.error ? t('models.engine.notrunnable', { engine: e.type }) : e.type)));
    drawn = '-';
    chosen();
  }).catch(() => {});
  const f = h('form', { class: 'inline', id: 'model-add-form' },
    h('label', { class: 'field' }, t('models.name'), name),
    h('label', { class: 'field' }, t('models.engine'), engine), list,
    h('label', { class: 'field' }, t('models.source'), source),
    h('label', { class: 'field' }, t('models.min'), min),
    h('label', { class: 'field' }, t('models.max'), max),
    h('button', { type: 'submit', class: 'primary' }, t('models.add')), options);
  f.addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = { name: name.value.trim(), engine: engine.value.trim(), scaling: { min: Number(min.value), max: Number(max.value) } };
    if (source.value.trim()) body.source = source.value.trim();
    for (const input of options.querySelectorAll('[data-option]')) {
      if (input.value.trim()) (body.options = body.options || {})[input.dataset.option] = input.value.trim();
    }
    await send(app, body, () => { f.reset(); drawn = '-'; chosen(); done(); });
  });

  const file = h('input', { type: 'file', id: 'model-file', accept: '.yaml,.yml,.json' });
  file.addEventListener('change', async () => { if (file.files[0]) text.value = await file.files[0].text(); });
  const g = h('form', { id: 'model-paste-form' },
    h('label', { class: 'field' }, t('models.paste'), text),
    h('p', { class: 'actions' }, file, h('button', { type: 'submit', class: 'primary' }, t('models.add'))));
  g.addEventListener('submit', async (e) => {
    e.preventDefault();
    let body;
    try {
      const raw = text.value.trim();
      body = raw.startsWith('{') ? JSON.parse(raw) : parseYAML(raw);
    } catch (err) {
      app.toast(t('models.badbody', { detail: err.key ? t(err.key, err.vars) : err.message }), true);
      return;
    }
    await send(app, body, () => { g.reset(); done(); });
  });
  return h('div', { class: 'card', id: 'model-add' }, h('h2', {}, t('models.addtitle')), f, example, h('p', { class: 'muted' }, t('models.orpaste')), g);
}

async function send(app, body, ok) {
  try {
    const m = await api('POST', '/llm/models', body);
    app.toast(t('models.added', { name: m.name }));
    ok();
  } catch (e) {
    app.fail(e);
  }
}

// reasons the gateway gives in fixed words, in the catalog; other reasons
// carry details (an error, a node) and are shown as the gateway words them.
const REASONS = {
  'starts on its first request': 'reason.ondemand',
  'a replica is starting': 'reason.starting',
  'an administrator stopped it': 'reason.adminstop',
  'no replica is running': 'reason.none',
};
const reason = (r) => (REASONS[r] ? t(REASONS[r]) : r);

function replicas(m) {
  if (!m.replicas || !m.replicas.length) return h('span', { class: 'muted' }, '–');
  return m.replicas.map((r) => h('div', { class: 'replica' },
    h('span', { class: `state ${r.state}` }, t(`state.${r.state}`)), ' ',
    r.node ? t('models.on', { node: r.node }) : '', r.inflight ? ` · ${t('models.inflight', { n: r.inflight })}` : '',
    r.reason ? h('div', { class: 'muted', 'data-field': 'replica-reason' }, r.reason) : null));
}

// testButton asks the gateway to probe the model's replicas now (POST
// …/test) and keeps what it found in tests, shown in the model's row.
function testButton(app, m, tests, reload) {
  const b = h('button', { type: 'button', 'data-act': 'test' }, t('models.test'));
  b.addEventListener('click', async () => {
    b.disabled = true;
    try {
      const r = await api('POST', `/llm/models/${encodeURIComponent(m.name)}/test`);
      const rep = (r.replicas || []).find((x) => x.state === 'ready') || (r.replicas || [])[0];
      const msg = r.ok ? t('models.test.ok', { name: m.name, status: rep.status, ms: num(rep.latency_ms, 0), url: rep.url })
        : t('models.test.failed', { name: m.name, reason: r.reason });
      tests.set(m.name, { ok: r.ok, msg });
      app.toast(msg, !r.ok);
      await reload();
    } catch (e) { app.fail(e); } finally { b.disabled = false; }
  });
  return b;
}

// retryButton starts a model whose last start failed now, instead of at
// the end of its backoff (POST …/retry); only a failed model has it
// enabled.
function retryButton(app, m, reload) {
  const failed = m.state === 'failed';
  const b = h('button', { type: 'button', 'data-act': 'retry', disabled: !failed, title: failed ? '' : t('models.retry.notfailed') }, t('models.retry'));
  b.addEventListener('click', async () => {
    b.disabled = true;
    try {
      await api('POST', `/llm/models/${encodeURIComponent(m.name)}/retry`);
      app.toast(t('models.retried', { name: m.name }));
      await reload();
    } catch (e) { app.fail(e); b.disabled = false; }
  });
  return b;
}

function actions(app, m, reload, list, open, tests) {
  if (!app.may('operate')) return null;
  const act = (path, body) => async () => {
    try { await api('POST', `/llm/models/${encodeURIComponent(m.name)}/${path}`, body); await reload(); } catch (e) { app.fail(e); }
  };
  const min = h('input', { type: 'number', min: 0, value: m.min, class: 'small', 'aria-label': t('models.min'), disabled: !m.runtime });
  const max = h('input', { type: 'number', min: 0, value: m.max, class: 'small', 'aria-label': t('models.max'), disabled: !m.runtime });
  const scale = h('button', { type: 'button', 'data-act': 'scale', disabled: !m.runtime, title: m.runtime ? '' : t('models.configonly') }, t('models.scale'));
  scale.addEventListener('click', () => act('scale', { min: Number(min.value), max: Number(max.value) })());
  const stop = h('button', { type: 'button', 'data-act': 'stop', onclick: act('stop') }, t('models.stop'));
  const start = h('button', { type: 'button', 'data-act': 'start', onclick: act('start') }, t('models.start'));
  const retry = retryButton(app, m, reload);
  const purge = h('input', { type: 'checkbox', 'data-act': 'purge' });
  const remove = armed(t('models.remove'), t('confirm'), async () => {
    try {
      await api('DELETE', `/llm/models/${encodeURIComponent(m.name)}${purge.checked ? '?purge=true' : ''}`);
      app.toast(t('models.removed', { name: m.name }));
      await reload();
    } catch (e) { app.fail(e); }
  }, { 'data-act': 'remove', disabled: !m.runtime, title: m.runtime ? '' : t('models.configonly') });
  return [h('div', { class: 'actions' }, min, max, scale, stop, start, retry, testButton(app, m, tests, reload), remove,
    h('label', { class: 'muted' }, purge, ` ${t('models.purge')}`)), manage(app, m, list, reload, open)];
}

// manage is a model's panel of changes that need more than a button:
// the canary (POST …/settings), a rolling restart (POST …/restart), and
// the registry's updates (GET …/updates, POST …/update, …/rollback).
function manage(app, m, list, reload, open) {
  const path = (p) => `/llm/models/${encodeURIComponent(m.name)}/${p}`;
  const others = list.filter((o) => o.name !== m.name).map((o) => o.name);
  const canaryModel = h('select', { 'data-field': 'canary-model', 'aria-label': t('models.canary.model') },
    h('option', { value: '' }, t('models.canary.none')),
    others.map((n) => h('option', { value: n, selected: m.canary && m.canary.model === n }, n)));
  const share = h('input', { type: 'number', min: 0, max: 100, step: 'any', class: 'small', 'data-field': 'canary-share',
    value: m.canary ? Math.round(m.canary.share * 1000) / 10 : 10, 'aria-label': t('models.canary.share') });
  const saveCanary = h('button', { type: 'button', 'data-act': 'canary' }, t('models.canary.save'));
  saveCanary.addEventListener('click', async () => {
    const canary = canaryModel.value ? { model: canaryModel.value, share: Number(share.value) / 100 } : { model: '' };
    try {
      await api('POST', path('settings'), { canary });
      app.toast(canaryModel.value ? t('models.canary.set', { name: m.name, canary: canaryModel.value, share: num(Number(share.value), 1) }) : t('models.canary.removed', { name: m.name }));
      await reload();
    } catch (e) { app.fail(e); }
  });
  const restart = armed(t('models.restart'), t('confirm'), async () => {
    try {
      const r = await api('POST', path('restart'));
      app.toast(t('models.restarted', { name: m.name, n: (r.started || []).length }));
      await reload();
    } catch (e) { app.fail(e); }
  }, { 'data-act': 'restart', class: '' });
  const updates = h('div', { class: 'updates', 'data-field': 'updates' });
  const check = h('button', { type: 'button', 'data-act': 'updates' }, t('models.updates.check'));
  check.addEventListener('click', async () => {
    try { showUpdates(app, m, updates, await api('GET', `${path('updates')}?check=true`), reload); } catch (e) { updates.replaceChildren(h('span', { class: 'muted', 'data-field': 'updates-error' }, explain(e))); }
  });
  const d = h('details', { class: 'manage', 'data-model': m.name, open: open.has(m.name) },
    h('summary', {}, t('models.manage')),
    h('div', { class: 'field-row' }, h('span', { class: 'muted' }, t('models.canary')), canaryModel, share, '%', saveCanary),
    h('p', { class: 'muted' }, t('models.canary.help')),
    h('div', { class: 'field-row' }, restart, h('span', { class: 'muted' }, t('models.restart.help'))),
    h('div', { class: 'field-row' }, check, updates));
  d.addEventListener('toggle', () => { if (d.open) open.add(m.name); else open.delete(m.name); });
  return d;
}

// showUpdates draws the answer of GET …/updates with the actions it allows.
function showUpdates(app, m, box, u, reload) {
  const path = (p) => `/llm/models/${encodeURIComponent(m.name)}/${p}`;
  const act = (p, done) => armed(t(`models.updates.${p}`), t('confirm'), async () => {
    try {
      const r = await api('POST', path(p));
      app.toast(t(done, { name: m.name, version: r.version || r.to || '' }));
      await reload();
    } catch (e) { app.fail(e); }
  }, { 'data-act': p, class: '' });
  const facts = [];
  if (u.current) facts.push(t('models.updates.current', { version: u.current }));
  if (u.update_available) facts.push(t('models.updates.available', { version: u.available }));
  else if (!u.error) facts.push(t('models.updates.none'));
  if (u.previous) facts.push(t('models.updates.previous', { version: u.previous }));
  if (u.checked_at) facts.push(t('models.updates.checked', { time: new Date(u.checked_at).toLocaleString() }));
  if (u.error) facts.push(u.error);
  box.replaceChildren(h('span', { class: 'muted' }, facts.join(' · ')), ' ',
    u.update_available ? act('update', 'models.updates.updated') : null, ' ',
    u.previous ? act('rollback', 'models.updates.rolledback') : null);
}

export async function models(root, app) {
  root.append(h('h1', {}, t('models.title')));
  const box = h('div', { id: 'models-table' });
  root.append(box);
  let shown = ''; // the last list drawn, to keep inputs while nothing changed
  const open = new Set(); // models whose Manage panel is open
  const tests = new Map(); // what Test connection last found, by model

  async function refresh(force) {
    const list = await api('GET', '/llm/models');
    const key = JSON.stringify(list.map((m) => [m.name, m.state, m.reason, m.min, m.max, m.replicas, m.canary]));
    if (key === shown && !force) return;
    if (!force && box.contains(document.activeElement) && ['INPUT', 'SELECT'].includes(document.activeElement.tagName)) return;
    shown = key;
    const rows = list.map((m) => h('tr', { 'data-model': m.name },
      h('td', {}, h('strong', { class: 'model-name' }, m.name), m.aliases && m.aliases.length ? h('div', { class: 'muted' }, m.aliases.join(', ')) : null,
        m.canary ? h('div', { class: 'muted', 'data-field': 'canary' }, t('models.canary.shown', { canary: m.canary.model, share: num(m.canary.share * 100, 1) })) : null),
      h('td', {}, m.engine, m.source ? h('div', { class: 'muted' }, m.source) : null),
      h('td', {}, h('span', { class: `state ${m.state}`, 'data-state': m.state }, t(`state.${m.state}`)),
        m.reason ? h('div', { class: 'muted', 'data-field': 'reason' }, reason(m.reason)) : null,
        tests.has(m.name) ? h('div', { class: `test-result ${tests.get(m.name).ok ? 'ok' : 'bad'}`, 'data-field': 'test-result' }, tests.get(m.name).msg) : null),
      h('td', {}, replicas(m)),
      h('td', { class: 'num' }, `${num(m.min, 0)}–${num(m.max, 0)}`),
      h('td', {}, m.class ? t(`class.${m.class}`) : '', m.owner ? h('div', { class: 'muted' }, m.owner) : null),
      app.may('operate') ? h('td', {}, actions(app, m, () => refresh(true), list, open, tests)) : null));
    const heads = ['col.model', 'col.engine', 'col.state', 'col.replicas', 'col.scaling', 'col.class']
      .concat(app.may('operate') ? ['col.actions'] : []).map((k) => h('th', {}, t(k)));
    box.replaceChildren(rows.length ? table(heads, rows) : h('p', {}, t('models.empty')));
  }
  if (app.may('operate')) root.append(addForm(app, () => refresh(true)));
  await refresh(true);
  return { refresh: () => refresh(false), every: 2000 };
}
