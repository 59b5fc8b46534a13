// Small DOM helpers. Every value goes in as a text node or an attribute,
// never as HTML, so data cannot become markup.

const SVG = 'http://www.w3.org/2000/svg';

function build(el, attrs, kids) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'text') el.textContent = String(v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of kids.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// h makes an HTML element: h('td', {class: 'num'}, 'text', child).
export function h(tag, attrs, ...kids) {
  return build(document.createElement(tag), attrs, kids);
}

// s makes an SVG element.
export function s(tag, attrs, ...kids) {
  return build(document.createElementNS(SVG, tag), attrs, kids);
}

// table makes a table from header cells and rows of cells.
export function table(heads, rows) {
  return h('table', {},
    h('thead', {}, h('tr', {}, heads.map((x) => (x instanceof Node ? x : h('th', {}, x))))),
    h('tbody', {}, rows));
}

// armed is a button that asks for a second click before it acts, instead
// of a blocking confirm dialog.
export function armed(label, confirmLabel, act, attrs) {
  let timer = 0;
  const b = h('button', Object.assign({ type: 'button', class: 'danger' }, attrs || {}), label);
  b.addEventListener('click', async () => {
    if (!b.classList.contains('armed')) {
      b.classList.add('armed');
      b.textContent = confirmLabel;
      timer = setTimeout(() => { b.classList.remove('armed'); b.textContent = label; }, 4000);
      return;
    }
    clearTimeout(timer);
    b.classList.remove('armed');
    b.textContent = label;
    b.disabled = true;
    try { await act(); } finally { b.disabled = false; }
  });
  return b;
}

// empty is a page's (or a part's) empty state: what is missing, and what
// to do about it.
export function empty(text, ...more) {
  return h('div', { class: 'empty', 'data-empty': '' }, h('p', {}, text), more);
}
