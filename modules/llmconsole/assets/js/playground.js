// Playground: chat with a model (or two side by side) through the site's
// own /v1 pipeline (quota, guardrails, cache) as the signed-in identity:
// the session's cookie and CSRF token stand for a key. Each answer shows
// its time to first token, tokens per second, and the cache's and
// guardrails' outcomes as the request log recorded them.
import { h } from './dom.js';
import { t, num } from './i18n.js';
import { api, csrfToken, APIError } from './api.js';

// chat sends one streamed chat completion and draws it into pane as it
// comes; it resolves with what the pane shows of it.
async function chat(body, pane, signal) {
  const out = h('div', { class: 'answer', 'data-field': 'answer' });
  const stats = h('p', { class: 'muted', 'data-field': 'stats' }, t('pg.waiting'));
  pane.replaceChildren(out, stats);
  const sent = performance.now();
  const r = await fetch('/v1/chat/completions', {
    method: 'POST', credentials: 'same-origin', signal,
    headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream', 'X-CSRF-Token': csrfToken() },
    body: JSON.stringify(body),
  });
  const id = r.headers.get('X-Request-Id') || '';
  pane.setAttribute('data-request', id);
  if (!r.ok) {
    let msg = '';
    try { const e = await r.json(); msg = (e.error && e.error.message) || ''; } catch (e) { msg = ''; }
    throw new APIError(r.status, msg);
  }
  let first = 0, usage = null, text = '', buf = '';
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, i);
      buf = buf.slice(i + 2);
      for (const line of ev.split('\n')) {
        if (!line.startsWith('data:')) continue;
        const data = line.slice(5).trim();
        if (data === '[DONE]') continue;
        let c;
        try { c = JSON.parse(data); } catch (e) { continue; }
        if (c.error) throw new APIError(502, c.error.message);
        if (c.usage) usage = c.usage;
        const d = c.choices && c.choices[0] && c.choices[0].delta;
        if (d && d.content) {
          if (!first) first = performance.now();
          text += d.content;
          out.textContent = text;
        }
      }
    }
  }
  const end = performance.now();
  const tokens = usage ? usage.completion_tokens : 0;
  const ttft = first ? first - sent : end - sent;
  const tps = tokens && end > first && first ? tokens / ((end - first) / 1000) : 0;
  pane.setAttribute('data-ttft', String(Math.round(ttft)));
  stats.replaceChildren(t('pg.stats', { ttft: num(ttft, 0), tps: num(tps, 1), tokens: num(tokens, 0) }));
  return { id, stats };
}

// outcomes adds the cache's and guardrails' outcomes of a request, from
// the request log (written a moment after the answer ends).
async function outcomes(id, stats) {
  for (let i = 0; i < 10 && id; i++) {
    try {
      const d = await api('GET', `/llm/requests/${encodeURIComponent(id)}`);
      stats.append(h('br', {}), h('span', { 'data-field': 'outcomes' },
        t('pg.outcomes', { cache: d.cache || t('pg.none'), guard: d.guard || t('pg.none'), id })));
      return;
    } catch (e) {
      if (!(e instanceof APIError) || e.status !== 404) return;
      await new Promise((res) => setTimeout(res, 300));
    }
  }
}

export async function playground(root, app) {
  root.append(h('h1', {}, t('pg.title')), h('p', { class: 'muted' }, t('pg.intro')));
  const list = await api('GET', '/llm/models');
  const names = (list.models || list || []).map((m) => m.name).filter(Boolean).sort();
  const pick = (id, blank) => h('select', { id }, blank ? h('option', { value: '' }, t('pg.nobody')) : null, names.map((n) => h('option', { value: n }, n)));
  const modelA = pick('pg-model'), modelB = pick('pg-compare', true);
  const system = h('textarea', { id: 'pg-system', rows: 2, placeholder: t('pg.system_hint') });
  const temp = h('input', { id: 'pg-temperature', type: 'number', min: 0, max: 2, step: 0.1, value: '0.7' });
  const maxTok = h('input', { id: 'pg-max-tokens', type: 'number', min: 1, max: 32768, value: '256' });
  const msg = h('textarea', { id: 'pg-message', rows: 4, required: true, placeholder: t('pg.message_hint') });
  const send = h('button', { type: 'submit', class: 'primary', id: 'pg-send' }, t('pg.send'));
  const form = h('form', { id: 'pg-form', class: 'card' },
    h('div', { class: 'inline' }, h('label', { class: 'field' }, t('col.model'), modelA), h('label', { class: 'field' }, t('pg.compare'), modelB),
      h('label', { class: 'field' }, t('pg.temperature'), temp), h('label', { class: 'field' }, t('pg.max_tokens'), maxTok)),
    h('label', { class: 'field wide' }, t('pg.system'), system), h('label', { class: 'field wide' }, t('pg.message'), msg), send);
  const paneA = h('div', { class: 'card pane', id: 'pg-answer-a' }), paneB = h('div', { class: 'card pane', id: 'pg-answer-b', hidden: true });
  root.append(form, h('div', { class: 'panes' }, paneA, paneB));
  if (!names.length) paneA.replaceChildren(h('p', { class: 'muted' }, t('pg.no_models')));
  let ctl = null;
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    if (ctl) ctl.abort();
    ctl = new AbortController();
    const messages = [];
    if (system.value.trim()) messages.push({ role: 'system', content: system.value });
    messages.push({ role: 'user', content: msg.value });
    const body = (model) => ({ model, messages, stream: true, stream_options: { include_usage: true },
      temperature: Number(temp.value), max_tokens: Number(maxTok.value) });
    const runs = [[modelA.value, paneA]];
    paneB.hidden = !modelB.value;
    if (modelB.value) runs.push([modelB.value, paneB]);
    send.disabled = true;
    try {
      await Promise.all(runs.map(async ([m, pane]) => {
        pane.setAttribute('data-model', m);
        try {
          const { id, stats } = await chat(body(m), pane, ctl.signal);
          await outcomes(id, stats);
        } catch (err) {
          if (err.name === 'AbortError') return;
          pane.append(h('p', { class: 'error', 'data-field': 'error' }, `${m}: ${err.detail || err.message}`));
        }
      }));
    } finally { send.disabled = false; }
  });
  return { stop: () => { if (ctl) ctl.abort(); } };
}
