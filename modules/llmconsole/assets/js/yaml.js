// parseYAML reads the YAML a model file is written in: nested mappings by
// indentation, lists of scalars or mappings ("- "), plain, quoted and
// flow-list scalars, comments. Anchors, tags and multi-line scalars are
// not supported; JSON is taken as it is.

// fail throws an error that names a catalog message: err.key, err.vars.
function fail(key, vars) {
  const e = new Error(key);
  e.key = key;
  e.vars = vars || {};
  throw e;
}

function scalar(v) {
  v = v.trim();
  if (v === '' || v === '~' || v === 'null') return null;
  if (v === 'true') return true;
  if (v === 'false') return false;
  if (/^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(v)) return Number(v);
  if (v.startsWith('"')) return JSON.parse(v);
  if (v.startsWith("'")) return v.slice(1, -1).replace(/''/g, "'");
  if (v.startsWith('[') || v.startsWith('{')) {
    try { return JSON.parse(v); } catch (e) { /* a flow list of plain words */ }
    if (v.startsWith('[')) return v.slice(1, -1).split(',').map((x) => x.trim()).filter((x) => x !== '').map(scalar);
  }
  return v;
}

function stripComment(line) {
  let q = '';
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (q) { if (c === q) q = ''; continue; }
    if (c === '"' || c === "'") q = c;
    else if (c === '#' && (i === 0 || /\s/.test(line[i - 1]))) return line.slice(0, i);
  }
  return line;
}

export function parseYAML(text) {
  const lines = [];
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = stripComment(raw).replace(/\s+$/, '');
    if (line.trim() === '' || line.trim() === '---') return;
    if (/^\s*\t/.test(line)) fail('yaml.tabs', { line: i + 1 });
    lines.push({ n: i + 1, indent: line.length - line.trimStart().length, text: line.trim() });
  });
  let pos = 0;

  function block(indent) {
    if (pos >= lines.length) return null;
    return lines[pos].text.startsWith('- ') || lines[pos].text === '-' ? list(lines[pos].indent) : map(lines[pos].indent);
  }

  function value(rest, indent) {
    if (rest !== '') return scalar(rest);
    if (pos < lines.length && lines[pos].indent > indent) return block(lines[pos].indent);
    if (pos < lines.length && lines[pos].indent === indent && lines[pos].text.startsWith('- ')) return list(indent);
    return null;
  }

  function map(indent) {
    const out = {};
    while (pos < lines.length && lines[pos].indent === indent && !lines[pos].text.startsWith('- ')) {
      const { n, text: line } = lines[pos];
      const m = /^("[^"]*"|'[^']*'|[^:]+?)\s*:(?:\s+(.*)|$)/.exec(line);
      if (!m) fail('yaml.keyvalue', { line: n });
      pos++;
      out[String(scalar(m[1]))] = value(m[2] === undefined ? '' : m[2], indent);
    }
    if (pos < lines.length && lines[pos].indent > indent) fail('yaml.indent', { line: lines[pos].n });
    return out;
  }

  function list(indent) {
    const out = [];
    while (pos < lines.length && lines[pos].indent === indent && (lines[pos].text.startsWith('- ') || lines[pos].text === '-')) {
      const item = lines[pos].text.slice(1).trimStart();
      if (item === '') { pos++; out.push(value('', indent)); continue; }
      if (/^[^"'[{][^:]*:(\s|$)/.test(item)) {
        // a mapping that starts on the dash's line: read it as if indented
        lines[pos] = { n: lines[pos].n, indent: indent + 2, text: item };
        out.push(map(indent + 2));
        continue;
      }
      pos++;
      out.push(scalar(item));
    }
    return out;
  }

  const out = block(0);
  if (pos < lines.length) fail('yaml.indent', { line: lines[pos].n });
  if (out === null || typeof out !== 'object' || Array.isArray(out)) fail('yaml.mapping');
  return out;
}
