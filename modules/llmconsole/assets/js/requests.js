// Requests: the request log (GET /llm/requests) with its filters, a live
// tail that adds what comes, older pages, and one request's detail (GET
// /llm/requests/{id}) with its bodies when its tenant keeps them.
import { h, table } from './dom.js';
import { t, num, time } from './i18n.js';
import { api } from './api.js';

const STATUSES = ['', 'error', '2xx', '4xx', '5xx', '429'];
const SINCE = ['15m', '1h', '24h', '7d', ''];
const KEEP = 500; // rows kept on screen while following

function row(r, open) {
  const model = r.served && r.served !== r.model ? `${r.model || ''} → ${r.served}${r.route ? ` (${r.route})` : ''}` : (r.model || '–');
  const failed = r.status >= 400 || r.error;
  return h('tr', { 'data-id': r.id, class: failed ? 'failed' : '', tabindex: 0, onclick: () => open(r.id), onkeydown: (e) => { if (e.key === 'Enter') open(r.id); } },
    h('td', {}, time(r.end)), h('td', { class: 'mono' }, r.id), h('td', {}, r.key_id || '–'), h('td', {}, r.tenant || '–'), h('td', {}, model),
    h('td', { class: failed ? 'bad' : 'good', 'data-status': r.status }, String(r.status), r.error ? ` ${r.error}` : ''),
    h('td', { class: 'num' }, `${num(r.prompt_tokens || 0, 0)} / ${num(r.completion_tokens || 0, 0)}`),
    h('td', { class: 'num' }, r.cost ? num(r.cost, 6) : '–'),
    h('td', { class: 'num' }, num(r.latency_ms || 0, 0)), h('td', { class: 'num' }, r.ttft_ms ? num(r.ttft_ms, 0) : '–'),
    h('td', {}, r.cache || '–'), h('td', {}, r.guard || '–'));
}

function detail(d) {
  const fields = [['col.id', d.id], ['col.node', d.node], ['req.api', d.api], ['col.key', d.key_id], ['req.tenant', d.tenant],
    ['req.asked', d.model], ['req.served', d.served], ['req.route', d.route], ['req.replica', d.replica ? `${d.replica} @ ${d.replica_node}` : ''],
    ['col.status', `${d.status}${d.error ? ` ${d.error}` : ''}`], ['req.latency', `${num(d.latency_ms || 0, 1)} ms`],
    ['req.ttft', d.ttft_ms ? `${num(d.ttft_ms, 1)} ms` : ''], ['req.cache', d.cache], ['req.guard', d.guard], ['req.kb', d.kb], ['req.tool', d.tool]]
    .filter(([, v]) => v);
  const kids = [h('h2', {}, t('req.detail')), table([t('col.field'), t('col.value')], fields.map(([k, v]) => h('tr', {}, h('th', {}, t(k)), h('td', {}, v))))];
  if (d.request_body || d.response_body) {
    kids.push(h('h3', {}, t('req.request_body')), h('pre', { class: 'body', id: 'req-request-body' }, d.request_body || ''),
      h('h3', {}, t('req.response_body')), h('pre', { class: 'body', id: 'req-response-body' }, d.response_body || ''));
    if (d.bodies_truncated) kids.push(h('p', { class: 'muted' }, t('req.truncated')));
  } else {
    kids.push(h('p', { class: 'muted' }, t('req.no_bodies')));
  }
  return kids;
}

export async function requests(root, app) {
  root.append(h('h1', {}, t('req.title')));
  const input = (id, ph) => h('input', { id, placeholder: ph || '', size: 14 });
  const model = input('req-model'), key = input('req-key'), tenant = input('req-tenant', 'org/team/project'), id = input('req-q', 'req_…');
  const status = h('select', { id: 'req-status' }, STATUSES.map((v) => h('option', { value: v }, t(v ? `req.status.${v}` : 'req.any'))));
  const since = h('select', { id: 'req-since' }, SINCE.map((v) => h('option', { value: v, selected: v === '1h' }, t(v ? `req.since.${v}` : 'req.any'))));
  const live = h('input', { type: 'checkbox', id: 'req-live' });
  if (app.session.tenant) tenant.value = app.session.tenant;
  const f = h('form', { class: 'inline', id: 'req-form' },
    [['col.model', model], ['col.key', key], ['req.tenant', tenant], ['col.status', status], ['req.since', since], ['req.id', id]]
      .map(([k, el]) => h('label', { class: 'field' }, t(k), el)),
    h('button', { type: 'submit', class: 'primary' }, t('req.find')),
    h('label', { class: 'field check' }, live, t('req.live')));
  const body = h('tbody', { id: 'req-rows' });
  const more = h('button', { type: 'button', id: 'req-more', hidden: true }, t('req.more'));
  const info = h('p', { class: 'muted', id: 'req-info' });
  const side = h('div', { class: 'card', id: 'req-detail', hidden: true });
  const heads = ['req.time', 'col.id', 'col.key', 'req.tenant', 'col.model', 'col.status', 'req.tokens', 'col.cost', 'req.latency', 'req.ttft', 'req.cache', 'req.guard'];
  root.append(h('div', { class: 'card' }, f), info,
    h('div', { class: 'scroll' }, h('table', { id: 'req-table' }, h('thead', {}, h('tr', {}, heads.map((k) => h('th', {}, t(k))))), body)),
    more, side);

  let next = '', newest = '';
  const query = (extra) => {
    const q = new URLSearchParams();
    for (const [k, el] of [['model', model], ['key', key], ['tenant', tenant], ['status', status], ['since', since], ['q', id]]) {
      if (el.value.trim()) q.set(k, el.value.trim());
    }
    for (const [k, v] of Object.entries(extra || {})) q.set(k, v);
    return q;
  };
  async function open(rid) {
    const d = await api('GET', `/llm/requests/${encodeURIComponent(rid)}`).catch((e) => { app.fail(e); return null; });
    if (!d) return;
    side.replaceChildren(...detail(d));
    side.hidden = false;
    side.scrollIntoView({ block: 'nearest' });
  }
  const show = (p, where) => {
    const rows = p.data.map((r) => row(r, open));
    if (where === 'top') body.prepend(...rows.reverse());
    else body.append(...rows);
    while (body.children.length > KEEP) body.lastChild.remove();
    if (!body.children.length) info.textContent = t('req.none');
    else info.textContent = t('req.count', { n: num(body.children.length, 0) });
  };
  async function load() {
    const p = await api('GET', `/llm/requests?${query({ limit: 100 })}`);
    body.replaceChildren();
    next = p.has_more ? p.next : '';
    newest = p.newest || '';
    more.hidden = !next;
    show(p, 'bottom');
  }
  async function follow() {
    if (!live.checked) return;
    if (!newest) return load();
    const q = query({ limit: 1000, after: newest });
    q.delete('since');
    const p = await api('GET', `/llm/requests?${q}`);
    if (p.next) newest = p.next;
    if (p.data.length) show(p, 'top');
  }
  more.addEventListener('click', async () => {
    try {
      const p = await api('GET', `/llm/requests?${query({ limit: 100, before: next })}`);
      next = p.has_more ? p.next : '';
      more.hidden = !next;
      show(p, 'bottom');
    } catch (e) { app.fail(e); }
  });
  f.addEventListener('submit', async (e) => {
    e.preventDefault();
    try { await load(); } catch (err) { app.fail(err); }
  });
  await load();
  return { refresh: follow, every: 2000 };
}
