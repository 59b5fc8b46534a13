// Knowledge bases (GET /llm/kb/stores …): the stores of every tenant
// (filtered by a tenant path), a store's files with their states and
// errors, uploads by drag and drop or a file picker with each file's
// progress (an XMLHttpRequest to POST /llm/kb/stores/<id>/files: fetch
// reports no upload progress), and a search of the store.
import { h, table, armed } from './dom.js';
import { t, time, num, bytes } from './i18n.js';
import { api, csrfToken, APIError, explain } from './api.js';

const STATES = ['completed', 'in_progress', 'failed', 'cancelled'];

// countsText says a store's files by state in short.
function countsText(fc) {
  const parts = STATES.filter((st) => fc[st]).map((st) => t(`kb.count.${st}`, { n: num(fc[st], 0) }));
  return parts.length ? parts.join(' · ') : t('kb.nofiles');
}

// upload sends one file to a store, drawing its progress in row; it
// resolves when the server answered.
function upload(store, file, row) {
  const bar = h('progress', { max: 1, value: 0 });
  const state = h('span', { class: 'muted', 'data-field': 'state' }, t('kb.upload.sending'));
  row.replaceChildren(h('span', { 'data-field': 'name' }, file.name), bar, state);
  return new Promise((resolve) => {
    const x = new XMLHttpRequest();
    x.open('POST', `/llm/kb/stores/${encodeURIComponent(store)}/files`);
    x.setRequestHeader('Accept', 'application/json');
    x.setRequestHeader('X-CSRF-Token', csrfToken());
    x.upload.addEventListener('progress', (e) => {
      if (!e.lengthComputable) return;
      bar.value = e.loaded / e.total;
      state.textContent = t('kb.upload.percent', { n: num((100 * e.loaded) / e.total, 0) });
    });
    x.addEventListener('load', () => {
      let detail = '';
      let sent = {};
      try { sent = JSON.parse(x.responseText) || {}; detail = sent.error || ''; } catch (e) { detail = x.responseText.slice(0, 300); }
      const ok = x.status >= 200 && x.status < 300;
      if (ok && sent.id) row.setAttribute('data-id', sent.id);
      bar.value = ok ? 1 : bar.value;
      row.setAttribute('data-upload', ok ? 'sent' : 'failed');
      state.className = ok ? 'muted' : 'error';
      state.textContent = ok ? t('kb.upload.sent') : explain(new APIError(x.status, detail));
      resolve(ok);
    });
    x.addEventListener('error', () => {
      row.setAttribute('data-upload', 'failed');
      state.className = 'error';
      state.textContent = explain(new APIError(0, ''));
      resolve(false);
    });
    const fd = new FormData();
    fd.append('file', file, file.name);
    x.send(fd);
  });
}

// uploader is the drop zone and file picker of a store, with a line per
// file sent; done is called after each upload.
function uploader(store, done) {
  const list = h('ul', { class: 'uploads', id: 'kb-uploads' });
  const picker = h('input', { type: 'file', id: 'kb-file', multiple: true, accept: '.pdf,.docx,.html,.htm,.md,.markdown,.txt' });
  async function send(files) {
    for (const f of files) {
      const row = h('li', { 'data-file': f.name });
      list.append(row);
      await upload(store, f, row);
      done();
    }
  }
  picker.addEventListener('change', () => { const fs = [...picker.files]; picker.value = ''; send(fs); });
  const zone = h('div', { class: 'dropzone', id: 'kb-drop' }, h('p', {}, t('kb.drop')), h('label', { class: 'field' }, t('kb.pick'), picker));
  zone.addEventListener('dragover', (e) => { e.preventDefault(); zone.classList.add('over'); });
  zone.addEventListener('dragleave', () => zone.classList.remove('over'));
  zone.addEventListener('drop', (e) => {
    e.preventDefault();
    zone.classList.remove('over');
    send([...(e.dataTransfer ? e.dataTransfer.files : [])]);
  });
  return h('div', { class: 'card' }, h('h3', {}, t('kb.upload')), zone, list);
}

// searcher is a store's search box and its passages.
function searcher(store, app) {
  const q = h('input', { type: 'search', id: 'kb-query', required: true, placeholder: t('kb.search.placeholder') });
  const out = h('div', { id: 'kb-results' });
  const f = h('form', { class: 'inline', id: 'kb-search-form' }, h('label', { class: 'field' }, t('kb.search'), q),
    h('button', { type: 'submit', class: 'primary' }, t('kb.search.go')));
  f.addEventListener('submit', async (e) => {
    e.preventDefault();
    try {
      const res = await api('POST', `/llm/kb/stores/${encodeURIComponent(store)}/search`, { query: q.value, max_num_results: 10 });
      out.replaceChildren(res.passages.length
        ? h('ol', { class: 'passages' }, res.passages.map((p) => h('li', { 'data-file': p.filename },
          h('p', {}, h('strong', {}, p.filename), ' ', h('span', { class: 'muted', 'data-field': 'score' }, t('kb.score', { n: num(p.score, 3) }))),
          h('p', { class: 'passage' }, p.text))))
        : h('p', {}, t('kb.search.none')));
    } catch (err) { app.fail(err); }
  });
  return h('div', { class: 'card' }, h('h3', {}, t('kb.search')), f, out);
}

// creator is the form that makes a store for a tenant.
function creator(app, made) {
  const tenant = h('input', { id: 'kb-new-tenant', required: true, placeholder: 'org/team/project' });
  const name = h('input', { id: 'kb-new-name' });
  const share = h('input', { type: 'checkbox', id: 'kb-new-share' });
  const f = h('form', { class: 'inline', id: 'kb-create-form' },
    h('label', { class: 'field' }, t('kb.tenant'), tenant), h('label', { class: 'field' }, t('kb.name'), name),
    h('label', { class: 'field' }, h('span', {}, share, ' ', t('kb.share'))), h('button', { type: 'submit', class: 'primary' }, t('kb.create')));
  f.addEventListener('submit', async (e) => {
    e.preventDefault();
    try {
      const s = await api('POST', '/llm/kb/stores', { tenant: tenant.value.trim(), share: share.checked, name: name.value.trim() });
      name.value = '';
      app.toast(t('kb.created', { name: s.name || s.id, tenant: s.tenant }));
      await made(s.id);
    } catch (err) { app.fail(err); }
  });
  return h('div', { class: 'card' }, h('h2', {}, t('kb.new')), f);
}

// storeRow is a store's line of the list.
function storeRow(s, selected, pick) {
  const open = h('button', { type: 'button', class: 'link', 'data-open': s.id }, s.name || s.id);
  open.addEventListener('click', () => pick(s.id));
  return h('tr', { 'data-store': s.id, class: s.id === selected ? 'selected' : '' },
    h('td', {}, open), h('td', {}, s.tenant, s.shared ? h('span', { class: 'muted' }, ` · ${t('kb.shared')}`) : ''),
    h('td', { 'data-field': 'files' }, countsText(s.file_counts)), h('td', { class: 'num' }, bytes(s.bytes)), h('td', {}, time(s.updated_at)));
}

// fileRow is a file's line of a store.
function fileRow(f) {
  return h('tr', { 'data-file': f.filename, 'data-state': f.status },
    h('td', {}, f.filename || f.id), h('td', { 'data-field': 'state', class: f.status === 'failed' ? 'error' : '' }, t(`kb.state.${f.status}`)),
    h('td', { class: 'error', 'data-field': 'error' }, f.error || ''), h('td', { class: 'num' }, bytes(f.bytes)),
    h('td', { class: 'num' }, num(f.chunks, 0)), h('td', {}, time(f.created_at)));
}

export async function knowledge(root, app) {
  root.append(h('h1', {}, t('kb.title')), h('p', { class: 'muted' }, t('kb.help')));
  let selected = '';
  const filter = h('input', { type: 'search', id: 'kb-filter', placeholder: 'org/team/project' });
  const listBox = h('div', { id: 'kb-stores' });
  const title = h('h2', { id: 'kb-title' });
  const filesBox = h('div', { id: 'kb-files' });
  const detail = h('section', { id: 'kb-detail' });
  if (app.may('operate')) root.append(creator(app, (id) => select(id)));
  root.append(h('label', { class: 'field' }, t('kb.filter'), filter), listBox, detail);
  let debounce = 0;
  filter.addEventListener('input', () => { clearTimeout(debounce); debounce = setTimeout(() => refresh().catch((e) => app.fail(e)), 300); });

  async function select(id) {
    selected = id;
    const actions = app.may('operate') ? h('p', { class: 'actions' },
      h('button', { type: 'button', id: 'kb-reindex', onclick: async () => {
        try { const r = await api('POST', `/llm/kb/stores/${encodeURIComponent(id)}/reindex`); app.toast(t('kb.reindexed', { n: r.files })); await refresh(); } catch (e) { app.fail(e); }
      } }, t('kb.reindex')),
      armed(t('kb.delete'), t('confirm'), async () => {
        try { await api('DELETE', `/llm/kb/stores/${encodeURIComponent(id)}`); selected = ''; detail.replaceChildren(); await refresh(); } catch (e) { app.fail(e); }
      }, { id: 'kb-delete' })) : '';
    detail.replaceChildren(title, actions, filesBox, app.may('operate') ? uploader(id, () => { drawFiles().catch(() => {}); }) : '', searcher(id, app));
    await refresh();
  }

  async function drawFiles() {
    if (!selected) return;
    const d = await api('GET', `/llm/kb/stores/${encodeURIComponent(selected)}`);
    title.textContent = t('kb.store', { name: d.name || d.id, tenant: d.tenant });
    for (const f of d.files) { // an upload's line follows its file until it is read
      const st = detail.querySelector(`#kb-uploads li[data-id="${CSS.escape(f.id)}"] [data-field="state"]`);
      if (!st || f.status === 'in_progress') continue;
      st.className = f.status === 'completed' ? 'muted' : 'error';
      st.textContent = f.error ? `${t(`kb.state.${f.status}`)}: ${f.error}` : t(`kb.state.${f.status}`);
    }
    filesBox.replaceChildren(d.files.length
      ? table([t('kb.col.file'), t('kb.col.state'), t('kb.col.error'), h('th', { class: 'num' }, t('kb.col.bytes')), h('th', { class: 'num' }, t('kb.col.chunks')), t('kb.col.added')], d.files.map(fileRow))
      : h('p', {}, t('kb.nofiles')));
  }

  async function refresh() {
    const q = filter.value.trim();
    let stores;
    try {
      stores = await api('GET', `/llm/kb/stores${q ? `?${new URLSearchParams({ tenant: q })}` : ''}`);
    } catch (e) {
      if (!(e instanceof APIError) || e.status !== 400) throw e;
      listBox.replaceChildren(h('p', { class: 'error' }, explain(e)));
      return;
    }
    listBox.replaceChildren(stores.length
      ? table([t('kb.col.name'), t('kb.col.tenant'), t('kb.col.files'), h('th', { class: 'num' }, t('kb.col.bytes')), t('kb.col.updated')],
        stores.map((s) => storeRow(s, selected, select)))
      : h('p', {}, t('kb.empty')));
    await drawFiles();
  }
  await refresh();
  return { refresh, every: 2000 };
}
