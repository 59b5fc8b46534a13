// Guardrails (the guardrails part of GET /llm/overview): outcomes per
// check and stage, findings per kind and action, totals since the
// gateway started; the outcomes over time from
// GET /llm/guardrails/history (kept by the gateway for a day, a
// cluster's nodes summed); the rates per minute of the tables come from
// the samples this page polled while it was open.
import { h, s, table } from './dom.js';
import { t, num, time, lang } from './i18n.js';
import { api } from './api.js';

const OUTCOMES = ['passed', 'redacted', 'blocked', 'flagged', 'skipped', 'errored'];
const KEEP = 200; // samples kept, the oldest is the rate's start
const WINDOWS = { '1h': '5m', '24h': '1h' }; // window → step

// overTime draws the outcomes of every check per step as stacked bars.
function overTime(hist) {
  const n = hist.series.length ? hist.series[0].counts.length : Math.round((Date.parse(hist.to) - Date.parse(hist.from)) / 1000 / hist.step_seconds);
  const steps = Array.from({ length: n }, () => Object.fromEntries(OUTCOMES.map((o) => [o, 0])));
  for (const ser of hist.series) {
    if (!(ser.outcome in steps[0] || {})) continue;
    ser.counts.forEach((c, i) => { steps[i][ser.outcome] += c; });
  }
  const W = 720, H = 170, pad = 28, bw = (W - 2 * pad) / Math.max(1, n);
  const totals = steps.map((st) => OUTCOMES.reduce((a, o) => a + st[o], 0));
  const max = Math.max(1, ...totals);
  const kids = [s('text', { x: 4, y: 14 }, num(max, 0)), s('text', { x: 4, y: H - pad }, '0')];
  const from = Date.parse(hist.from), fmt = new Intl.DateTimeFormat(lang(), { hour: '2-digit', minute: '2-digit' });
  const every = Math.max(1, Math.ceil(n / 8));
  steps.forEach((st, i) => {
    const at = new Date(from + i * hist.step_seconds * 1000), x = pad + i * bw, label = fmt.format(at);
    let y = H - pad;
    const tip = OUTCOMES.filter((o) => st[o]).map((o) => `${t(`guardrails.outcome.${o}`)}: ${num(st[o], 0)}`).join(', ');
    const g = s('g', { 'data-step': at.toISOString(), 'data-total': totals[i] }, s('title', {}, `${label} · ${tip || '0'}`));
    for (const o of OUTCOMES) {
      if (!st[o]) continue;
      const bh = (st[o] / max) * (H - 2 * pad);
      y -= bh;
      g.append(s('rect', { x: x + 1, y, width: Math.max(1, bw - 2), height: bh, class: `o-${o}`, 'data-outcome': o, 'data-count': st[o] }));
    }
    kids.push(g);
    if (i % every === 0) kids.push(s('text', { x, y: H - 8 }, label));
  });
  return s('svg', { class: 'chart', id: 'guard-history', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': t('guardrails.overtime') }, s('title', {}, t('guardrails.overtime')), kids);
}

export async function guardrails(root) {
  root.append(h('h1', {}, t('guardrails.title')), h('p', { class: 'muted' }, t('guardrails.help')));
  const checksBox = h('div', { id: 'guard-checks' });
  const findingsBox = h('div', { id: 'guard-findings' });
  const stamp = h('p', { class: 'muted' });
  const windowSel = h('select', { id: 'guard-window', 'aria-label': t('guardrails.window') },
    Object.keys(WINDOWS).map((w) => h('option', { value: w, selected: w === '24h' }, t(`guardrails.window.${w}`))));
  const historyBox = h('div', { id: 'guard-history-box' });
  const legend = h('p', { class: 'legend muted' }, OUTCOMES.map((o) => h('span', {}, h('i', { class: `swatch o-${o}` }), t(`guardrails.outcome.${o}`))));
  root.append(h('h2', {}, t('guardrails.overtime')), h('label', { class: 'field' }, t('guardrails.window'), windowSel), historyBox, legend,
    h('h2', {}, t('guardrails.checks')), checksBox, h('h2', {}, t('guardrails.findings')), findingsBox, stamp);
  let historyAt = 0;
  async function drawHistory() {
    const w = windowSel.value;
    const hist = await api('GET', `/llm/guardrails/history?${new URLSearchParams({ window: w, step: WINDOWS[w] })}`);
    historyBox.replaceChildren(overTime(hist));
    historyAt = Date.now();
  }
  windowSel.addEventListener('change', () => { historyAt = 0; drawHistory().catch(() => {}); });
  const samples = []; // {at, counts: Map(key → total)}

  // cell shows a total and, once two samples exist, its rate per minute
  // since the first sample of this page.
  function cell(key, total, attrs, now) {
    const first = samples[0];
    const mins = first ? (now - first.at) / 60000 : 0;
    const rate = mins > 0 ? (total - (first.counts.get(key) || 0)) / mins : null;
    return h('td', { class: 'num', ...attrs }, h('span', { class: 'count' }, num(total, 0)),
      h('span', { class: 'muted rate' }, rate === null ? '' : ` · ${t('guardrails.rate', { n: num(rate, 1) })}`));
  }

  async function refresh() {
    const data = await api('GET', '/llm/overview');
    const g = data.guardrails || { checks: [], findings: [] };
    const at = Date.now();
    const counts = new Map();
    const checkRows = g.checks.map((c) => h('tr', { 'data-check': c.check, 'data-stage': c.stage },
      h('td', {}, c.check), h('td', {}, t(`guardrails.stage.${c.stage}`)),
      OUTCOMES.map((o) => {
        const key = `c|${c.check}|${c.stage}|${o}`;
        const n = c.outcomes[o] || 0;
        counts.set(key, n);
        return cell(key, n, { 'data-outcome': o }, at);
      })));
    const findingRows = g.findings.map((f) => {
      const key = `f|${f.check}|${f.kind}|${f.action}`;
      counts.set(key, f.count);
      return h('tr', { 'data-check': f.check, 'data-kind': f.kind },
        h('td', {}, f.check), h('td', {}, f.kind), h('td', {}, f.action), cell(key, f.count, { 'data-field': 'count' }, at));
    });
    samples.push({ at, counts });
    if (samples.length > KEEP) samples.shift();
    checksBox.replaceChildren(checkRows.length
      ? table([h('th', {}, t('col.check')), h('th', {}, t('col.stage')), ...OUTCOMES.map((o) => h('th', { class: 'num' }, t(`guardrails.outcome.${o}`)))], checkRows)
      : h('p', {}, t('guardrails.empty')));
    findingsBox.replaceChildren(findingRows.length
      ? table([t('col.check'), t('col.kind'), t('col.action'), h('th', { class: 'num' }, t('col.count'))], findingRows)
      : h('p', {}, t('guardrails.nofindings')));
    stamp.textContent = t('updated', { time: time(data.at) });
    if (Date.now() - historyAt > 15000) await drawHistory();
  }
  await refresh();
  return { refresh, every: 3000 };
}
