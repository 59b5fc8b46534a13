// Cache (GET /llm/cache, purge) and Mirror (GET /llm/mirror, versions).
import { h, table, armed } from './dom.js';
import { t, num, bytes, time } from './i18n.js';
import { api, APIError } from './api.js';

// kv shows an object of unknown shape as a two-column table.
function kv(obj) {
  const rows = Object.entries(obj || {}).map(([k, v]) => h('tr', {},
    h('th', {}, k),
    h('td', {}, v !== null && typeof v === 'object' ? h('pre', { class: 'kv' }, JSON.stringify(v, null, 1)) : String(v))));
  return table([h('th', {}, t('col.field')), h('th', {}, t('col.value'))], rows);
}

export async function cache(root, app) {
  root.append(h('h1', {}, t('cache.title')));
  const box = h('div', { id: 'cache-stats' });
  if (app.may('operate')) {
    const model = h('input', { id: 'purge-model', placeholder: t('keys.optional') });
    const scope = h('input', { id: 'purge-scope', placeholder: 'p:org/team/project' });
    const btn = armed(t('cache.purge'), t('confirm'), async () => {
      try {
        const r = await api('POST', '/llm/cache/purge', { model: model.value.trim(), scope: scope.value.trim() });
        app.toast(t('cache.purged', { n: r && r.purged !== undefined ? r.purged : '?' }));
        await refresh();
      } catch (e) { app.fail(e); }
    }, { id: 'purge-button' });
    root.append(h('div', { class: 'card' }, h('h2', {}, t('cache.purgetitle')),
      h('div', { class: 'inline' }, h('label', { class: 'field' }, t('col.model'), model), h('label', { class: 'field' }, t('cache.scope'), scope), btn)));
  }
  root.append(box);
  async function refresh() {
    const list = await api('GET', '/llm/cache');
    if (!list || !list.length) {
      box.replaceChildren(h('p', {}, t('cache.none')));
      return;
    }
    const known = ['entries', 'bytes', 'hits_exact', 'hits_semantic', 'misses', 'bypass', 'stored'];
    const rows = list.map((c, i) => {
      const hits = (c.hits_exact || 0) + (c.hits_semantic || 0);
      const asked = hits + (c.misses || 0);
      const other = Object.fromEntries(Object.entries(c || {}).filter(([k]) => !known.includes(k)));
      return h('tr', { 'data-cache': i },
        known.map((k) => h('td', { class: 'num', 'data-field': k }, k === 'bytes' ? bytes(c[k]) : num(c[k], 0))),
        h('td', { class: 'num' }, asked ? `${num((100 * hits) / asked, 1)} %` : '–'),
        Object.keys(other).length ? h('td', {}, kv(other)) : h('td', {}));
    });
    box.replaceChildren(table(known.map((k) => `cache.${k}`).concat(['cache.hitrate', 'cache.other']).map((k) => h('th', { class: 'num' }, t(k))), rows));
  }
  await refresh();
  return { refresh, every: 5000 };
}

const yes = (b) => (b ? t('yes') : t('no'));
const heads = (keys) => keys.map((k, i) => h('th', { class: i && k !== 'col.store' ? 'num' : '' }, t(k)));

// stores shows each store's state at the last reconciliation.
function stores(sync) {
  const rows = (sync && sync.stores ? sync.stores : []).map((st) => h('tr', { 'data-store': st.name },
    h('td', {}, st.name), h('td', { class: 'num' + (st.reachable ? '' : ' error') }, yes(st.reachable)),
    h('td', { class: 'num' }, num(st.versions, 0)), h('td', { class: 'num' }, num(st.lag_versions, 0)),
    h('td', { class: 'num' }, bytes(st.lag_bytes)), h('td', { class: 'num' }, num(st.lag_removals, 0))));
  return [
    sync && sync.last_run ? h('p', { class: 'muted' }, t('mirror.lastsync', { time: time(sync.last_run), secs: num(sync.duration_seconds, 2) })) : null,
    table(heads(['col.store', 'col.reachable', 'col.versions', 'col.lag', 'col.lagbytes', 'col.removals']), rows)];
}

// transfers shows what moves now, with a progress bar each.
function transfers(list) {
  if (!list || !list.length) return h('p', { class: 'muted' }, t('mirror.notransfers'));
  return table(heads(['col.kind', 'col.file', 'col.store', 'col.progress', 'col.rate', 'col.eta']), list.map((x) => h('tr', {},
    h('td', {}, t(`mirror.kind.${x.kind}`)), h('td', {}, `${x.model}/${x.version}/${x.file}`), h('td', {}, x.store || '–'),
    h('td', { class: 'num' }, h('progress', { max: Math.max(1, x.total), value: x.bytes }), ` ${bytes(x.bytes)} / ${bytes(x.total)}`),
    h('td', { class: 'num' }, `${bytes(x.bytes_per_second)}/s`), h('td', { class: 'num' }, x.eta_seconds ? `${num(x.eta_seconds, 0)} s` : '–'))));
}

// nodeCache shows the versions this node keeps, least recently used first.
function nodeCache(list) {
  if (!list || !list.length) return h('p', { class: 'muted' }, t('mirror.nocache'));
  return table(heads(['col.model', 'col.version', 'col.size', 'col.inuse', 'col.complete']), list.map((c) => h('tr', {},
    h('td', {}, c.model), h('td', {}, c.version), h('td', { class: 'num' }, bytes(c.size)),
    h('td', { class: 'num' }, num(c.in_use, 0)), h('td', { class: 'num' }, yes(c.complete)))));
}

export async function mirror(root) {
  root.append(h('h1', {}, t('mirror.title')));
  const storesBox = h('div', { id: 'mirror-stores' });
  const moving = h('div', { id: 'mirror-transfers' });
  const cached = h('div', { id: 'mirror-cache' });
  const versions = h('div', { id: 'mirror-versions' });
  root.append(h('h2', {}, t('mirror.stores')), storesBox, h('h2', {}, t('mirror.transfers')), moving,
    h('h2', {}, t('mirror.versions')), versions, h('h2', {}, t('mirror.cache')), cached);
  async function refresh() {
    let st, list;
    try {
      [st, list] = await Promise.all([api('GET', '/llm/mirror'), api('GET', '/llm/mirror/versions')]);
    } catch (e) {
      if (e instanceof APIError && e.status === 404) {
        storesBox.replaceChildren(h('p', { class: 'muted' }, t('mirror.none')));
        for (const box of [moving, cached, versions]) box.replaceChildren();
        return;
      }
      throw e;
    }
    storesBox.replaceChildren(...stores(st.sync).filter(Boolean));
    moving.replaceChildren(transfers(st.transfers));
    cached.replaceChildren(nodeCache(st.cache));
    const rows = (list || []).map((v) => h('tr', { 'data-version': `${v.model}/${v.version}` },
      h('td', {}, v.model || ''), h('td', {}, v.version || ''),
      h('td', { class: 'num' }, bytes(v.size)), h('td', { class: 'num' }, num(v.files, 0)),
      h('td', {}, (v.stores || []).join(', ')), h('td', {}, time(v.added))));
    versions.replaceChildren(rows.length ? table(['col.model', 'col.version', 'col.size', 'col.files', 'col.stores', 'col.created'].map((k) => h('th', {}, t(k))), rows) : h('p', {}, t('mirror.empty')));
  }
  await refresh();
  return { refresh, every: 3000 };
}
