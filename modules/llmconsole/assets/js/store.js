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
    box.replaceChildren(...(list && list.length ? list.map((c) => h('div', { class: 'card' }, kv(c))) : [h('p', {}, t('cache.none'))]));
  }
  await refresh();
  return { refresh, every: 5000 };
}

export async function mirror(root) {
  root.append(h('h1', {}, t('mirror.title')));
  const stores = h('div', { id: 'mirror-stores' });
  const versions = h('div', { id: 'mirror-versions' });
  root.append(h('h2', {}, t('mirror.stores')), stores, h('h2', {}, t('mirror.versions')), versions);
  async function refresh() {
    let st, list;
    try {
      [st, list] = await Promise.all([api('GET', '/llm/mirror'), api('GET', '/llm/mirror/versions')]);
    } catch (e) {
      if (e instanceof APIError && e.status === 404) {
        stores.replaceChildren(h('p', { class: 'muted' }, t('mirror.none')));
        versions.replaceChildren();
        return;
      }
      throw e;
    }
    stores.replaceChildren(kv(st));
    const rows = (list || []).map((v) => h('tr', {},
      h('td', {}, v.model || ''), h('td', {}, v.version || ''),
      h('td', { class: 'num' }, v.size !== undefined ? bytes(v.size) : (v.bytes !== undefined ? bytes(v.bytes) : '–')),
      h('td', { class: 'num' }, v.files !== undefined ? num(Array.isArray(v.files) ? v.files.length : v.files, 0) : '–'),
      h('td', {}, Array.isArray(v.stores) ? v.stores.join(', ') : JSON.stringify(v.stores || '')),
      h('td', {}, time(v.created || v.added))));
    versions.replaceChildren(rows.length ? table(['col.model', 'col.version', 'col.size', 'col.files', 'col.stores', 'col.created'].map((k) => h('th', {}, t(k))), rows) : h('p', {}, t('mirror.empty')));
  }
  await refresh();
  return { refresh, every: 5000 };
}
