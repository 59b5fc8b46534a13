// Message catalogs (i18n/<lang>.json) and the language choice: the
// person's choice kept with the session (and in this browser), else the
// browser's preferred languages, else English.

export const LANGS = ['en', 'de'];
const STORE = 'llmgw.console.lang';
let catalog = {};
let current = 'en';

export function lang() { return current; }

export async function setLang(l) {
  const r = await fetch(`i18n/${l}.json`, { credentials: 'same-origin' });
  catalog = await r.json();
  current = l;
  document.documentElement.lang = l;
}

// pick returns the language to use: the session's, this browser's stored
// choice, or the first of navigator.languages we have.
export function pick(sessionLang) {
  if (LANGS.includes(sessionLang)) return sessionLang;
  let stored = '';
  try { stored = localStorage.getItem(STORE) || ''; } catch (e) { /* storage off */ }
  if (LANGS.includes(stored)) return stored;
  for (const l of navigator.languages || [navigator.language || 'en']) {
    const base = String(l).toLowerCase().split('-')[0];
    if (LANGS.includes(base)) return base;
  }
  return 'en';
}

export function remember(l) {
  try { localStorage.setItem(STORE, l); } catch (e) { /* storage off */ }
}

// t returns the message of key with {name} replaced from vars.
export function t(key, vars) {
  const msg = catalog[key];
  if (msg === undefined) return key;
  return msg.replace(/\{(\w+)\}/g, (m, k) => (vars && k in vars ? String(vars[k]) : m));
}

export function num(n, digits) {
  if (n === undefined || n === null || Number.isNaN(n)) return '–';
  return new Intl.NumberFormat(current, { maximumFractionDigits: digits === undefined ? 1 : digits }).format(n);
}

export function time(v) {
  if (!v) return '–';
  const d = new Date(v);
  if (Number.isNaN(d.getTime()) || d.getFullYear() < 2000) return '–';
  return new Intl.DateTimeFormat(current, { dateStyle: 'short', timeStyle: 'medium' }).format(d);
}

export function bytes(n) {
  if (!n) return '0';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${num(n)} ${units[i]}`;
}
