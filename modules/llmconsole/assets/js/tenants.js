// Tenants (GET /llm/tenants): the tree of organisations, teams and
// projects in tree order, each with its limits, its capacity and what
// the replicas of its models hold of it on this node, its models and its
// keys, and where it was declared.
import { h, table, empty } from './dom.js';
import { t, num, bytes } from './i18n.js';
import { api } from './api.js';

// The limits shown, in order; the rest are named by their field.
const COUNTS = ['requests_per_minute', 'tokens_per_minute', 'tokens_per_day', 'max_concurrent', 'max_output', 'tool_calls_per_minute', 'tool_calls_per_day', 'kb_files'];

// limitsList says a level's limits, one per line.
function limitsList(l) {
  if (!l || !Object.keys(l).length) return h('span', { class: 'muted' }, t('tenants.inherits'));
  const items = [];
  for (const k of COUNTS) if (l[k]) items.push(t(`tenants.limit.${k}`, { n: num(l[k], 0) }));
  if (l.budget) items.push(t('tenants.limit.budget', { n: num(l.budget, 2), period: t(`tenants.period.${l.budget_period || 'month'}`) }));
  if (l.kb_bytes) items.push(t('tenants.limit.kb_bytes', { n: bytes(l.kb_bytes) }));
  if (l.models && l.models.length) items.push(t('tenants.limit.models', { list: l.models.join(', ') }));
  if (l.tools && l.tools.length) items.push(t('tenants.limit.tools', { list: l.tools.join(', ') }));
  return h('ul', { class: 'plain', 'data-field': 'limits' }, items.map((x) => h('li', {}, x)));
}

// capacityList says, per resource, what is used of the capacity; a
// resource without a capacity shows its use alone.
function capacityList(cap, used) {
  const c = cap || {};
  const u = used || {};
  const items = [['replicas', (n) => num(n, 0)], ['memory', bytes], ['cores', (n) => num(n, 0)], ['gpus', (n) => num(n, 0)]]
    .filter(([k]) => c[k] || u[k])
    .map(([k, fmt]) => h('li', { 'data-resource': k },
      c[k] ? t('tenants.usedof', { what: t(`tenants.res.${k}`), used: fmt(u[k] || 0), cap: fmt(c[k]) }) : t('tenants.usedonly', { what: t(`tenants.res.${k}`), used: fmt(u[k] || 0) }),
      c[k] ? h('progress', { max: c[k], value: Math.min(u[k] || 0, c[k]) }) : null));
  return items.length ? h('ul', { class: 'plain', 'data-field': 'capacity' }, items) : h('span', { class: 'muted' }, t('tenants.nocapacity'));
}

function row(l) {
  const depth = l.path.split('/').length - 1;
  return h('tr', { 'data-tenant': l.path, 'data-kind': l.kind, class: `depth-${depth}` },
    h('td', { class: 'tree' }, h('span', { class: `indent-${depth}` }, h('span', { class: `kind ${l.kind}` }, t(`tenants.kind.${l.kind}`)), ' ', h('strong', {}, l.name)),
      h('div', { class: 'muted' }, t(`tenants.source.${l.source}`))),
    h('td', {}, limitsList(l.limits)),
    h('td', {}, capacityList(l.capacity, l.used)),
    h('td', { class: 'wrap' }, (l.models || []).join(', ') || '–'),
    h('td', { class: 'num', 'data-field': 'keys' }, num(l.keys, 0)));
}

export async function tenants(root) {
  root.append(h('h1', {}, t('tenants.title')), h('p', { class: 'muted' }, t('tenants.help')));
  const box = h('div', { id: 'tenants-tree' });
  root.append(box);
  async function refresh() {
    const levels = (await api('GET', '/llm/tenants')) || [];
    box.replaceChildren(levels.length
      ? table(['tenants.level', 'col.limits.all', 'col.capacity', 'col.models', 'tenants.keys'].map((k) => h('th', {}, t(k))), levels.map(row))
      : empty(t('tenants.empty'), h('pre', { class: 'kv' }, 'llm {\n\torg acme {\n\t\trequests_per_minute 600\n\t\tteam research {\n\t\t\tproject alpha {\n\t\t\t\tkey k1 <sha256>\n\t\t\t}\n\t\t}\n\t}\n}')));
  }
  await refresh();
  return { refresh, every: 10000 };
}
