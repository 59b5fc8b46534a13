// Usage: GET /llm/usage for an org, team, project or key over a period,
// by model, as a table and an SVG chart; and the total's line over time
// while the page is open.
import { h, s, table } from './dom.js';
import { t, num, lang } from './i18n.js';
import { api, cached, fresh } from './api.js';

const RANGES = { '1h': 3600e3, '24h': 86400e3, '7d': 7 * 86400e3, '30d': 30 * 86400e3 };

function bars(models) {
  const names = Object.keys(models).sort();
  const W = 720, row = 26, left = 160, top = 8;
  const H = top * 2 + Math.max(1, names.length) * row;
  const max = Math.max(1, ...names.map((n) => models[n].input_tokens + models[n].output_tokens));
  const scale = (W - left - 90) / max;
  const kids = [];
  names.forEach((n, i) => {
    const u = models[n], y = top + i * row;
    const wi = u.input_tokens * scale, wo = u.output_tokens * scale;
    kids.push(
      s('text', { x: left - 6, y: y + 16, 'text-anchor': 'end' }, n.length > 24 ? `${n.slice(0, 23)}…` : n),
      s('rect', { x: left, y: y + 4, width: Math.max(0, wi), height: row - 10, class: 'in' }),
      s('rect', { x: left + wi, y: y + 4, width: Math.max(0, wo), height: row - 10, class: 'out' }),
      s('text', { x: left + wi + wo + 6, y: y + 16 }, num(u.input_tokens + u.output_tokens, 0)));
  });
  if (!names.length) kids.push(s('text', { x: left, y: top + 16 }, t('usage.none')));
  return s('svg', { class: 'chart', id: 'usage-chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': t('usage.chart') }, s('title', {}, t('usage.chart')), kids);
}

// hours draws requests per hour as bars, with the tokens in each bar's
// tooltip.
function hours(points) {
  const W = 720, H = 160, pad = 28, bw = (W - 2 * pad) / Math.max(1, points.length);
  const max = Math.max(1, ...points.map((p) => p[1].requests));
  const kids = [s('text', { x: 4, y: 14 }, num(max, 0)), s('text', { x: 4, y: H - pad }, '0')];
  points.forEach(([at, u], i) => {
    const bh = (u.requests / max) * (H - 2 * pad), x = pad + i * bw;
    const hour = new Intl.DateTimeFormat(lang(), { hour: '2-digit', minute: '2-digit' }).format(at);
    kids.push(s('rect', { x: x + 1, y: H - pad - bh, width: Math.max(1, bw - 2), height: bh, class: 'out', 'data-hour': at.toISOString() },
      s('title', {}, t('usage.hour', { hour, requests: num(u.requests, 0), input: num(u.input_tokens, 0), output: num(u.output_tokens, 0) }))));
    if (i % 3 === 0) kids.push(s('text', { x, y: H - 8 }, hour));
  });
  return s('svg', { class: 'chart', id: 'usage-hours', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': t('usage.hourly') }, kids);
}

const iso = (d) => d.toISOString().replace(/\.\d+Z$/, 'Z');

export async function usage(root, app) {
  root.append(h('h1', {}, t('usage.title')));
  const level = h('select', { id: 'usage-level' }, ['org', 'team', 'project', 'key'].map((l) => h('option', { value: l }, t(`usage.${l}`))));
  const name = h('input', { id: 'usage-name', list: 'usage-names', required: true });
  const names = h('datalist', { id: 'usage-names' });
  const range = h('select', { id: 'usage-range' }, Object.keys(RANGES).map((r) => h('option', { value: r, selected: r === '24h' }, t(`usage.range.${r}`))));
  const f = h('form', { class: 'inline', id: 'usage-form' },
    h('label', { class: 'field' }, t('usage.level'), level),
    h('label', { class: 'field' }, t('usage.name'), name), names,
    h('label', { class: 'field' }, t('usage.period'), range),
    h('button', { type: 'submit', class: 'primary' }, t('usage.show')));
  const out = h('div', { id: 'usage-out' });
  const perHour = h('div', {});
  root.append(h('div', { class: 'card' }, f), out, h('h2', {}, t('usage.hourly')), perHour);
  // The last 24 hours, one query per hour: all of them once a minute or
  // when the query changes, else only the current hour.
  let byHour = { query: '', at: 0, points: [] };

  const known = { org: new Set(), team: new Set(), project: new Set(), key: new Set() };
  if (app.session.level && app.session.tenant) {
    level.value = app.session.level;
    name.value = app.session.tenant;
  }
  // Names to suggest, from the keys; not waited for.
  const learn = (list) => {
    for (const k of list || []) {
      const parts = String(k.project || '').split('/');
      known.org.add(parts[0]);
      if (parts.length > 1) known.team.add(parts.slice(0, 2).join('/'));
      if (parts.length > 2) known.project.add(k.project);
      known.key.add(k.id);
    }
    suggest();
  };
  const suggest = () => names.replaceChildren(...[...known[level.value]].sort().slice(0, 500).map((v) => h('option', { value: v })));
  level.addEventListener('change', () => { suggest(); name.value = ''; });
  // The first keys only: enough to suggest, not the whole list.
  const last = cached('/llm/keys?limit=500');
  if (last) learn(last.data.keys);
  else fresh('/llm/keys?limit=500').then((p) => learn(p.keys)).catch(() => {});
  if (!name.value && known.org.size) name.value = [...known.org].sort()[0];

  async function refresh() {
    if (!name.value.trim()) {
      if (level.value !== 'org' || !known.org.size) return;
      name.value = [...known.org].sort()[0];
    }
    const to = new Date(), from = new Date(to.getTime() - RANGES[range.value]);
    const q = new URLSearchParams({ [level.value]: name.value.trim(), from: iso(from), to: iso(to) });
    const u = await api('GET', `/llm/usage?${q}`);
    const models = u.models || {};
    const rows = Object.keys(models).sort().map((m) => h('tr', { 'data-model': m },
      h('td', {}, m), h('td', { class: 'num' }, num(models[m].requests, 0)),
      h('td', { class: 'num' }, num(models[m].input_tokens, 0)), h('td', { class: 'num' }, num(models[m].output_tokens, 0)),
      h('td', { class: 'num' }, num(models[m].cost_micros / 1e6, 4))));
    const tot = u.total || { requests: 0, input_tokens: 0, output_tokens: 0, cost_micros: 0 };
    rows.push(h('tr', { class: 'total' }, h('th', {}, t('usage.total')), h('th', { class: 'num', id: 'usage-total-requests' }, num(tot.requests, 0)),
      h('th', { class: 'num' }, num(tot.input_tokens, 0)), h('th', { class: 'num' }, num(tot.output_tokens, 0)), h('th', { class: 'num' }, num(tot.cost_micros / 1e6, 4))));
    out.replaceChildren(
      table(['col.model', 'col.requests', 'col.input', 'col.output', 'col.cost'].map((k, i) => h('th', { class: i ? 'num' : '' }, t(k))), rows),
      h('p', { class: 'legend muted' }, h('span', {}, h('i', { class: 'swatch in' }), t('col.input')), h('span', {}, h('i', { class: 'swatch out' }), t('col.output'))),
      bars(models));
    // The chart of hours follows; the page does not wait for it.
    if (!hoursBusy) {
      hoursBusy = true;
      drawHours().catch((e) => { if (!leaving.signal.aborted) app.fail(e); }).finally(() => { hoursBusy = false; });
    }
  }
  let hoursBusy = false;
  const leaving = new AbortController(); // ends the hourly queries when the page is left

  async function drawHours() {
    const query = `${level.value}=${name.value.trim()}`;
    const top = new Date();
    top.setUTCMinutes(0, 0, 0); // usage is kept in hourly buckets of UTC
    const all = query !== byHour.query || Date.now() - byHour.at > 60e3;
    const starts = [];
    for (let i = all ? 23 : 0; i >= 0; i--) starts.push(new Date(top.getTime() - i * 3600e3));
    const got = await Promise.all(starts.map((st) => api('GET', `/llm/usage?${new URLSearchParams({ [level.value]: name.value.trim(), from: iso(st), to: iso(new Date(st.getTime() + 3599e3)) })}`, undefined, leaving.signal)
      .then((u) => [st, u.total || { requests: 0, input_tokens: 0, output_tokens: 0 }])));
    if (all) byHour = { query, at: Date.now(), points: got };
    else byHour.points = byHour.points.filter((p) => p[0].getTime() < top.getTime()).slice(-23).concat(got);
    perHour.replaceChildren(hours(byHour.points));
  }
  f.addEventListener('submit', async (e) => {
    e.preventDefault();
    byHour.query = '';
    try { await refresh(); } catch (err) { app.fail(err); }
  });
  await refresh();
  return { refresh, every: 3000, stop: () => leaving.abort() };
}
