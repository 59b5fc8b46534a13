// The sign-in page: the methods the site offers (GET /llm/auth/methods).
import { h } from './dom.js';
import { t, LANGS, lang } from './i18n.js';
import { api, explain } from './api.js';

export async function signin(root, app, message) {
  let methods = ['token'];
  let oidc = null;
  try {
    const m = await api('GET', '/llm/auth/methods');
    if (m && Array.isArray(m.methods) && m.methods.length) methods = m.methods;
    if (m && m.oidc && typeof m.oidc.start === 'string' && m.oidc.start.startsWith('/')) oidc = m.oidc;
  } catch (e) { /* offer the token form */ }
  const out = h('p', { class: 'error', id: 'signin-error', role: 'alert' });
  const info = message ? h('p', { class: 'muted', id: 'signin-info' }, message) : null;

  async function send(body, form) {
    out.textContent = '';
    const btn = form.querySelector('button');
    btn.disabled = true;
    try {
      const sess = await api('POST', '/llm/auth/login', body);
      form.reset();
      await app.signedIn(sess);
    } catch (e) {
      out.textContent = explain(e);
    } finally {
      btn.disabled = false;
    }
  }

  const forms = [];
  if (methods.includes('oidc') && oidc) {
    // A plain link: the provider's pages and its redirect back are
    // navigations, and the server sends the browser back to this page.
    const back = encodeURIComponent(location.pathname + location.search);
    forms.push(h('p', { class: 'sso' }, h('a', { href: `${oidc.start}?return=${back}`, id: 'signin-oidc', class: 'button primary' },
      t('signin.oidc', { name: oidc.name }))));
  }
  if (methods.includes('token')) {
    const tok = h('input', { type: 'password', name: 'token', id: 'signin-token', autocomplete: 'off', required: true });
    const f = h('form', { id: 'signin-token-form', method: 'post' },
      h('h2', {}, t('signin.token')),
      h('label', { class: 'field' }, t('signin.token.label'), tok),
      h('p', {}, h('button', { type: 'submit', class: 'primary' }, t('signin.submit'))));
    f.addEventListener('submit', (e) => { e.preventDefault(); send({ method: 'token', token: tok.value }, f); });
    forms.push(f);
  }
  if (methods.includes('ldap')) {
    const user = h('input', { type: 'text', name: 'username', id: 'signin-user', autocomplete: 'username', required: true });
    const pass = h('input', { type: 'password', name: 'password', id: 'signin-pass', autocomplete: 'current-password', required: true });
    const f = h('form', { id: 'signin-ldap-form', method: 'post' },
      h('h2', {}, t('signin.ldap')),
      h('label', { class: 'field' }, t('signin.user'), user),
      h('label', { class: 'field' }, t('signin.pass'), pass),
      h('p', {}, h('button', { type: 'submit', class: 'primary' }, t('signin.submit'))));
    f.addEventListener('submit', (e) => { e.preventDefault(); send({ method: 'ldap', username: user.value, password: pass.value }, f); });
    forms.push(f);
  }
  const choose = h('select', { id: 'signin-lang', 'aria-label': t('lang.label') },
    LANGS.map((l) => h('option', { value: l, selected: l === lang() }, t(`lang.${l}`))));
  choose.addEventListener('change', () => app.changeLang(choose.value));
  root.append(h('div', { class: 'card signin', id: 'page-signin' }, h('h1', {}, t('signin.title')), info, forms, out,
    h('p', { class: 'muted' }, h('label', {}, t('lang.label'), ' ', choose))));
}
