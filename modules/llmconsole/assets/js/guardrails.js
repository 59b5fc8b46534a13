// Guardrails (the guardrails part of GET /llm/overview): outcomes per
// check and stage, findings per kind and action. The gateway keeps only
// totals since its start; the rates per minute come from the samples
// this page polled while it was open.
import { h, table } from './dom.js';
import { t, num, time } from './i18n.js';
import { api } from './api.js';

const OUTCOMES = ['passed', 'redacted', 'blocked', 'flagged', 'skipped', 'errored'];
const KEEP = 200; // samples kept, the oldest is the rate's start

export async function guardrails(root) {
  root.append(h('h1', {}, t('guardrails.title')), h('p', { class: 'muted' }, t('guardrails.help')));
  const checksBox = h('div', { id: 'guard-checks' });
  const findingsBox = h('div', { id: 'guard-findings' });
  const stamp = h('p', { class: 'muted' });
  root.append(h('h2', {}, t('guardrails.checks')), checksBox, h('h2', {}, t('guardrails.findings')), findingsBox, stamp);
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
  }
  await refresh();
  return { refresh, every: 3000 };
}
