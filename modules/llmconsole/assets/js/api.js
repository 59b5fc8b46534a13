// Calls to the admin routes of the same site, with the session cookie and
// the CSRF token on every change.
import { t } from './i18n.js';

let csrf = '';
export function setCSRF(token) { csrf = token || ''; }
// csrfToken is the session's token, for requests made without api().
export function csrfToken() { return csrf; }

export class APIError extends Error {
  constructor(status, detail, retryAfter, code) {
    super(detail || `status ${status}`);
    this.status = status;
    this.detail = detail || '';
    this.retryAfter = retryAfter || '';
    this.code = code || ''; // the error's code, for errors that carry one
  }
}

// reach is told whether each call reached the gateway: false when it did
// not answer at all, true when it answered anything.
let reach = () => {};
export function onReach(fn) { reach = fn; }

export async function api(method, path, body, signal) {
  const opt = { method, credentials: 'same-origin', headers: { Accept: 'application/json' }, signal };
  if (body !== undefined) {
    opt.headers['Content-Type'] = 'application/json';
    opt.body = typeof body === 'string' ? body : JSON.stringify(body);
  }
  if (method !== 'GET' && method !== 'HEAD') opt.headers['X-CSRF-Token'] = csrf;
  let r;
  try {
    r = await fetch(path, opt);
  } catch (e) {
    if (!(signal && signal.aborted)) reach(false);
    throw new APIError(0, String(e && e.message ? e.message : e));
  }
  reach(true);
  if (r.status === 204) return null;
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
  if (!r.ok) {
    let detail = data && data.error;
    let code = data && typeof data.code === 'string' ? data.code : '';
    if (detail && typeof detail === 'object') {
      code = typeof detail.code === 'string' ? detail.code : code;
      detail = detail.message;
    }
    throw new APIError(r.status, detail || text.slice(0, 300), r.headers.get('Retry-After'), code);
  }
  return data;
}

// explain turns an error into a sentence in the person's language: the
// error's code translated where the catalog has it (code.<code>), else
// what its status means; the server's own reason (in English) follows.
export function explain(err) {
  if (!(err instanceof APIError)) return t('err.client', { detail: String(err && err.message ? err.message : err) });
  const known = [0, 400, 401, 403, 404, 409, 413, 422, 429, 502, 503, 504];
  let key = known.includes(err.status) ? `err.${err.status}` : (err.status >= 500 ? 'err.5xx' : 'err.other');
  if (err.code && t(`code.${err.code}`) !== `code.${err.code}`) key = `code.${err.code}`;
  let msg = t(key, { status: err.status, retry: err.retryAfter || '?' });
  if (err.detail) msg += ` — ${err.detail}`;
  return msg;
}

// A cache of large lists (the keys to suggest), so a page draws at once from the
// last answer while a fresh one is fetched. Cleared at every sign-in and
// sign-out: one person never sees another's list.
const lists = new Map(); // path → {at, data}

export function cached(path) { return lists.get(path); }

export async function fresh(path) {
  const data = await api('GET', path);
  lists.set(path, { at: Date.now(), data });
  return data;
}

export function forget() { lists.clear(); }
