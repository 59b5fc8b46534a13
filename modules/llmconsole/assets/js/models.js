// Models: state, replicas and their nodes, reasons; add (form or pasted
// JSON/YAML, the body of POST /llm/models), scale, stop/start, remove.
import { h, table, armed } from './dom.js';
import { t, num } from './i18n.js';
import { api } from './api.js';
import { parseYAML } from './yaml.js';

function addForm(app, done) {
  const name = h('input', { name: 'name', id: 'model-name', required: true });
  const engine = h('input', { name: 'engine', id: 'model-engine', list: 'engine-list', required: true });
  const source = h('input', { name: 'source', id: 'model-source' });
  const min = h('input', { name: 'min', id: 'model-min', type: 'number', min: 0, value: 1, class: 'small' });
  const max = h('input', { name: 'max', id: 'model-max', type: 'number', min: 0, value: 1, class: 'small' });
  const list = h('datalist', { id: 'engine-list' });
  api('GET', '/llm/engines').then((es) => list.replaceChildren(...(es || []).map((e) => h('option', { value: e.type })))).catch(() => {});
  const f = h('form', { class: 'inline', id: 'model-add-form' },
    h('label', { class: 'field' }, t('models.name'), name),
    h('label', { class: 'field' }, t('models.engine'), engine), list,
    h('label', { class: 'field' }, t('models.source'), source),
    h('label', { class: 'field' }, t('models.min'), min),
    h('label', { class: 'field' }, t('models.max'), max),
    h('button', { type: 'submit', class: 'primary' }, t('models.add')));
  f.addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = { name: name.value.trim(), engine: engine.value.trim(), scaling: { min: Number(min.value), max: Number(max.value) } };
    if (source.value.trim()) body.source = source.value.trim();
    await send(app, body, () => { f.reset(); done(); });
  });

  const text = h('textarea', { id: 'model-body', spellcheck: 'false', placeholder: 'name: chat\nengine: sim\nscaling:\n  min: 1' });
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
  return h('div', { class: 'card', id: 'model-add' }, h('h2', {}, t('models.addtitle')), f, h('p', { class: 'muted' }, t('models.orpaste')), g);
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
    r.node ? t('models.on', { node: r.node }) : '', r.inflight ? ` · ${t('models.inflight', { n: r.inflight })}` : ''));
}

function actions(app, m, reload) {
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
  const purge = h('input', { type: 'checkbox', 'data-act': 'purge' });
  const remove = armed(t('models.remove'), t('confirm'), async () => {
    try {
      await api('DELETE', `/llm/models/${encodeURIComponent(m.name)}${purge.checked ? '?purge=true' : ''}`);
      app.toast(t('models.removed', { name: m.name }));
      await reload();
    } catch (e) { app.fail(e); }
  }, { 'data-act': 'remove', disabled: !m.runtime, title: m.runtime ? '' : t('models.configonly') });
  return h('div', { class: 'actions' }, min, max, scale, stop, start, remove,
    h('label', { class: 'muted' }, purge, ` ${t('models.purge')}`));
}

export async function models(root, app) {
  root.append(h('h1', {}, t('models.title')));
  const box = h('div', { id: 'models-table' });
  root.append(box);
  let shown = ''; // the last list drawn, to keep inputs while nothing changed

  async function refresh(force) {
    const list = await api('GET', '/llm/models');
    const key = JSON.stringify(list.map((m) => [m.name, m.state, m.reason, m.min, m.max, m.replicas]));
    if (key === shown && !force) return;
    if (!force && box.contains(document.activeElement) && document.activeElement.tagName === 'INPUT') return;
    shown = key;
    const rows = list.map((m) => h('tr', { 'data-model': m.name },
      h('td', {}, h('strong', { class: 'model-name' }, m.name), m.aliases && m.aliases.length ? h('div', { class: 'muted' }, m.aliases.join(', ')) : null),
      h('td', {}, m.engine, m.source ? h('div', { class: 'muted' }, m.source) : null),
      h('td', {}, h('span', { class: `state ${m.state}`, 'data-state': m.state }, t(`state.${m.state}`)),
        m.reason ? h('div', { class: 'muted' }, reason(m.reason)) : null),
      h('td', {}, replicas(m)),
      h('td', { class: 'num' }, `${num(m.min, 0)}–${num(m.max, 0)}`),
      h('td', {}, m.class ? t(`class.${m.class}`) : '', m.owner ? h('div', { class: 'muted' }, m.owner) : null),
      app.may('operate') ? h('td', {}, actions(app, m, () => refresh(true))) : null));
    const heads = ['col.model', 'col.engine', 'col.state', 'col.replicas', 'col.scaling', 'col.class']
      .concat(app.may('operate') ? ['col.actions'] : []).map((k) => h('th', {}, t(k)));
    box.replaceChildren(rows.length ? table(heads, rows) : h('p', {}, t('models.empty')));
  }
  if (app.may('operate')) root.append(addForm(app, () => refresh(true)));
  await refresh(true);
  return { refresh: () => refresh(false), every: 2000 };
}
