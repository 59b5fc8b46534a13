// Overview: charts over the last hour or day (GET /llm/traffic, the
// history the gateway keeps) above the totals since the start
// (GET /llm/overview); and Nodes (GET /llm/nodes, or /llm/node outside a
// cluster).
import { h, table } from './dom.js';
import { t, num, bytes, time } from './i18n.js';
import { api, APIError } from './api.js';
import { lineChart } from './chart.js';

const WINDOWS = { '1h': '1m', '24h': '15m' }; // window → step
const CHARTS_EVERY = 15000; // ms between reads of the history

// charts draws a series of GET /llm/traffic (overall or one model's).
function charts(ser) {
  const times = ser.points.map((p) => new Date(p.at));
  const col = (k) => ser.points.map((p) => p[k]);
  const line = (id, title, series, digits) => lineChart({ id, title: t(title), times, digits,
    series: series.map(([name, k]) => ({ name: t(name), values: col(k) })) });
  return [
    line('chart-requests', 'overview.chart.requests', [['overview.series.rps', 'requests_per_second']], 2),
    line('chart-errors', 'overview.chart.errors', [['overview.series.errors', 'errors_per_second'], ['overview.series.client', 'client_errors_per_second']], 3),
    line('chart-latency', 'overview.chart.latency', [['overview.series.p50', 'latency_p50_ms'], ['overview.series.p95', 'latency_p95_ms']], 0),
    line('chart-ttft', 'overview.chart.ttft', [['overview.series.p50', 'ttft_p50_ms'], ['overview.series.p95', 'ttft_p95_ms']], 0),
    line('chart-tokens', 'overview.chart.tokens', [['overview.series.tps', 'tokens_per_second']], 1),
    line('chart-replicas', 'overview.chart.replicas', [['overview.series.ready', 'replicas_ready']], 0),
  ].map((svg) => h('figure', {}, h('figcaption', {}, svg.getAttribute('aria-label')), svg));
}

// trafficSection is the charts with their window and model choice; its
// refresh reads the history again when it is older than CHARTS_EVERY.
function trafficSection(root) {
  const windowSel = h('select', { id: 'traffic-window' },
    Object.keys(WINDOWS).map((w) => h('option', { value: w }, t(`overview.window.${w}`))));
  const modelSel = h('select', { id: 'traffic-model' }, h('option', { value: '' }, t('overview.allmodels')));
  const box = h('div', { id: 'traffic-charts', class: 'charts' });
  root.append(h('h2', {}, t('overview.overtime')),
    h('div', { class: 'inline' }, h('label', { class: 'field' }, t('overview.window'), windowSel),
      h('label', { class: 'field' }, t('overview.model'), modelSel)), box);
  let data = null, at = 0;
  const draw = () => {
    if (!data) return;
    const names = data.models.map((m) => m.model);
    const chosen = modelSel.value;
    modelSel.replaceChildren(h('option', { value: '' }, t('overview.allmodels')),
      ...names.map((n) => h('option', { value: n, selected: n === chosen }, n)));
    const ser = data.models.find((m) => m.model === chosen) || data.overall;
    box.replaceChildren(...charts(ser));
  };
  async function refresh(force) {
    if (!force && Date.now() - at < CHARTS_EVERY) return;
    const w = windowSel.value;
    data = await api('GET', `/llm/traffic?${new URLSearchParams({ window: w, step: WINDOWS[w] })}`);
    at = Date.now();
    draw();
  }
  windowSel.addEventListener('change', () => { refresh(true).catch(() => {}); });
  modelSel.addEventListener('change', draw);
  return refresh;
}

export async function overview(root, app) {
  root.append(h('h1', {}, t('overview.title')));
  const refreshCharts = trafficSection(root);
  root.append(h('h2', {}, t('overview.totals')), h('p', { class: 'muted' }, t('overview.help')));
  const box = h('div', { id: 'overview-table' });
  const stamp = h('p', { class: 'muted' });
  root.append(box, stamp);
  let last = null; // the previous poll, for rates

  async function refresh() {
    const data = await api('GET', '/llm/overview');
    const at = Date.now();
    const prev = last;
    last = { at, by: new Map(data.models.map((m) => [m.model, m])) };
    const rows = data.models.map((m) => {
      const p = prev && prev.by.get(m.model);
      const secs = prev ? (at - prev.at) / 1000 : 0;
      const rate = p && secs > 0 ? (m.requests - p.requests) / secs : null;
      return h('tr', { 'data-model': m.model },
        h('td', {}, m.model),
        h('td', {}, m.state ? h('span', { class: `state ${m.state}` }, t(`state.${m.state}`)) : '–'),
        h('td', { class: 'num' }, num(m.ready, 0)),
        h('td', { class: 'num' }, num(m.requests, 0)),
        h('td', { class: 'num' + (m.errors ? ' error' : '') }, num(m.errors, 0)),
        h('td', { class: 'num' }, rate === null ? '–' : num(rate, 2)),
        h('td', { class: 'num' }, m.ttft_ms ? num(m.ttft_ms) : '–'),
        h('td', { class: 'num' }, m.ttft_p50_ms ? num(m.ttft_p50_ms) : '–'),
        h('td', { class: 'num' }, m.tokens_per_second ? num(m.tokens_per_second) : '–'),
        h('td', { class: 'num' }, num(m.prompt_tokens, 0)),
        h('td', { class: 'num' }, num(m.completion_tokens, 0)));
    });
    const heads = ['col.model', 'col.state', 'col.ready', 'col.requests', 'col.errors', 'col.rps', 'col.ttft', 'col.ttft50', 'col.tps', 'col.prompt', 'col.completion']
      .map((k, i) => h('th', { class: i >= 2 ? 'num' : '' }, t(k)));
    box.replaceChildren(rows.length ? table(heads, rows) : h('p', {}, t('overview.empty')));
    stamp.textContent = t('updated', { time: time(data.at) });
    await refreshCharts();
  }
  await refresh();
  return { refresh, every: 3000 };
}

export async function nodes(root) {
  root.append(h('h1', {}, t('nodes.title')));
  const box = h('div', { id: 'nodes-table' });
  root.append(box);

  const amounts = (a) => (a ? `${bytes(a.memory)} · ${t('nodes.cores', { n: a.cores })} · ${t('nodes.gpus', { n: a.gpus })}` : '–');

  async function refresh() {
    let st;
    try {
      st = await api('GET', '/llm/nodes');
    } catch (e) {
      if (!(e instanceof APIError) || e.status !== 404) throw e;
      const one = await api('GET', '/llm/node');
      box.replaceChildren(h('p', { class: 'muted' }, t('nodes.single')),
        table([t('col.capacity'), t('col.used'), t('col.free')].map((x) => h('th', {}, x)),
          [h('tr', {}, h('td', {}, amounts(one.capacity)), h('td', {}, amounts(one.used)), h('td', {}, amounts(one.free)))]));
      return;
    }
    const rows = (st.nodes || []).map((n) => h('tr', { 'data-node': n.name },
      h('td', {}, n.name, n.leader ? h('span', { class: 'state ready' }, ` ${t('nodes.leader')}`) : null,
        n.drained ? h('span', { class: 'state draining' }, ` ${t('nodes.drained')}`) : null),
      h('td', {}, n.address),
      h('td', {}, n.heartbeat_age),
      h('td', {}, amounts(n.capacity)),
      h('td', {}, amounts(n.used)),
      h('td', { class: 'num' }, num((n.replicas || []).length, 0)),
      h('td', {}, Object.entries(n.failing || {}).map(([m, why]) => h('div', { class: 'error' }, `${m}: ${why}`)))));
    box.replaceChildren(
      h('p', { class: 'muted' }, t('nodes.cluster', { name: st.cluster, store: st.store, leader: st.leader || '–' })),
      st.store_error ? h('p', { class: 'error' }, st.store_error) : null,
      table(['col.node', 'col.address', 'col.heartbeat', 'col.capacity', 'col.used', 'col.replicas', 'col.failing'].map((k) => h('th', {}, t(k))), rows));
  }
  await refresh();
  return { refresh, every: 4000 };
}
