// Line charts in SVG, drawn with the DOM helpers (no framework, no
// markup from strings): a y axis from 0 to a round maximum, time labels,
// one line per series (broken where a value is missing), a legend, and a
// column per point whose tooltip lists every series' value there.
import { s } from './dom.js';
import { num, lang } from './i18n.js';

const COLORS = ['#2457c5', '#d0453a', '#e0a030', '#1b7f3b'];
const W = 560, H = 190, LEFT = 44, RIGHT = 8, TOP = 10, BOTTOM = 22;

// nice rounds a maximum up to 1, 2 or 5 times a power of ten.
function nice(max) {
  if (!(max > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(max));
  return [1, 2, 5, 10].map((m) => m * p).find((v) => v >= max);
}

// paths splits a series' points into runs without missing values.
function paths(values, x, y) {
  const runs = [];
  let run = [];
  values.forEach((v, i) => {
    if (v === null || v === undefined) {
      if (run.length) runs.push(run);
      run = [];
      return;
    }
    run.push(`${x(i).toFixed(1)},${y(v).toFixed(1)}`);
  });
  if (run.length) runs.push(run);
  return runs;
}

// lineChart draws series ([{name, values}]) over times (Dates): id names
// the SVG, title is its accessible name, digits the values' decimals.
// The SVG carries data-last (the last point's value of the first series)
// and data-max (the largest value shown), for tests and tools.
export function lineChart({ id, title, times, series, digits = 2 }) {
  const n = times.length;
  const all = series.flatMap((ser) => ser.values.filter((v) => v !== null && v !== undefined));
  const max = nice(Math.max(0, ...all));
  const x = (i) => LEFT + (n > 1 ? (i * (W - LEFT - RIGHT)) / (n - 1) : 0);
  const y = (v) => TOP + (H - TOP - BOTTOM) * (1 - v / max);
  const fmt = new Intl.DateTimeFormat(lang(), { hour: '2-digit', minute: '2-digit' });
  const kids = [s('title', {}, title)];
  for (const v of [0, max / 2, max]) {
    kids.push(s('line', { x1: LEFT, x2: W - RIGHT, y1: y(v), y2: y(v), stroke: '#d9dee7', 'stroke-width': 1 }),
      s('text', { x: LEFT - 4, y: y(v) + 3, 'text-anchor': 'end' }, num(v, max >= 10 ? 0 : 2)));
  }
  const every = Math.max(1, Math.ceil(n / 6));
  times.forEach((at, i) => {
    if (i % every === 0) kids.push(s('text', { x: x(i), y: H - 6, 'text-anchor': 'middle' }, fmt.format(at)));
  });
  series.forEach((ser, k) => {
    const color = COLORS[k % COLORS.length];
    for (const run of paths(ser.values, x, y)) {
      if (run.length === 1) { // a point alone: a dot, a line of one point is not drawn
        const [cx, cy] = run[0].split(',');
        kids.push(s('circle', { cx, cy, r: 2.5, fill: color, 'data-series': ser.name }));
        continue;
      }
      kids.push(s('polyline', { points: run.join(' '), fill: 'none', stroke: color, 'stroke-width': 1.6, 'data-series': ser.name }));
    }
  });
  kids.push(columns(times, series, x, fmt, digits), legend(series));
  const first = series[0] ? series[0].values : [];
  return s('svg', { class: 'chart line-chart', id, viewBox: `0 0 ${W} ${H + 18}`, role: 'img', 'aria-label': title,
    'data-last': first.length ? first[first.length - 1] ?? '' : '', 'data-max': Math.max(0, ...all) }, kids);
}

// columns are the hover targets: one transparent column per point whose
// title lists the time and each series' value.
function columns(times, series, x, fmt, digits) {
  const n = times.length;
  const half = n > 1 ? (x(1) - x(0)) / 2 : 4;
  const g = s('g', { class: 'hover' });
  times.forEach((at, i) => {
    const tip = [fmt.format(at), ...series.map((ser) => `${ser.name}: ${num(ser.values[i], digits)}`)].join('\n');
    g.append(s('rect', { x: x(i) - half, y: TOP, width: 2 * half, height: H - TOP - BOTTOM, fill: 'transparent',
      'data-at': at.toISOString() }, s('title', {}, tip)));
  });
  return g;
}

// legend names each series with its line's colour, under the chart.
function legend(series) {
  const g = s('g', { class: 'legend' });
  let at = LEFT;
  series.forEach((ser, k) => {
    g.append(s('rect', { x: at, y: H + 6, width: 10, height: 10, fill: COLORS[k % COLORS.length] }),
      s('text', { x: at + 14, y: H + 15 }, ser.name));
    at += 24 + 7 * ser.name.length;
  });
  return g;
}
