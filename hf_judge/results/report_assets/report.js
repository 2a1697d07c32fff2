// The hf-judge report page: reads the JSON the page embeds and draws four tabs. No network, no dependency.
(function () {
  'use strict';
  const D = JSON.parse(document.getElementById('hf-judge-data').textContent);
  const PAGE = 100;
  const splits = Object.keys(D.splits);
  const S = { tab: 'overview', split: splits[0], sort: null, desc: false, search: '', page: 0, kind: '', open: null,
              thr: {}, keepMissing: false, onlyPass: false };
  const STORE = 'hf-judge-labels:' + D.key;

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else if (k === 'text') e.textContent = v;
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const k of kids.flat()) if (k !== null && k !== undefined && k !== false) e.append(k instanceof Node ? k : String(k));
    return e;
  }
  const fmt = (v) => v === null || v === undefined ? '' : typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toFixed(3).replace(/\.?0+$/, '')) : typeof v === 'object' ? JSON.stringify(v) : String(v);
  const num = (v) => v === null || v === undefined ? null : typeof v === 'boolean' ? (v ? 1 : 0) : typeof v === 'number' ? v : null;
  const kv = (pairs) => el('table', { class: 'kv' }, pairs.filter((p) => p[1] !== '' && p[1] !== null && p[1] !== undefined).map(([k, v]) => el('tr', {}, el('td', {}, k), el('td', {}, v))));
  const table = (head, rows, attrs) => el('table', attrs || {}, el('thead', {}, el('tr', {}, head.map((h) => el('th', {}, h)))), el('tbody', {}, rows.map((r) => el('tr', {}, r.map((c) => el('td', {}, c))))));
  const int = (n) => (n || 0).toLocaleString('en-US');
  // an argument of a command to paste in a shell, quoted as Python's shlex.quote quotes it: a column or split name
  // holding `;` or `$(...)` stays one argument and runs nothing
  const shq = (v) => { const t = String(v); return t === '' ? "''" : /^[A-Za-z0-9_@%+=:,.\/-]+$/.test(t) ? t : "'" + t.replace(/'/g, "'\"'\"'") + "'"; };

  // -- labels (localStorage) ------------------------------------------------------------------------------
  function loadLabels() { try { return JSON.parse(localStorage.getItem(STORE) || '{}'); } catch (e) { return {}; } }
  function saveLabels(l) { try { localStorage.setItem(STORE, JSON.stringify(l)); } catch (e) { /* storage off: kept for this visit */ } LABELS = l; }
  let LABELS = loadLabels();
  const reviewer = () => localStorage.getItem('hf-judge-reviewer') || '';

  // -- the split's rows ------------------------------------------------------------------------------------
  function sp() { return D.splits[S.split]; }
  function nRows(s) { return s.indices.length; }
  function value(s, col, pos) { const c = s.columns[col]; return c ? c[pos] : null; }
  function thresholds() { return S.thr[S.split] || (S.thr[S.split] = {}); }
  function activeThresholds() {
    const out = [];
    for (const [c, t] of Object.entries(thresholds())) {
      const lo = t.min === '' || t.min === undefined ? null : Number(t.min), hi = t.max === '' || t.max === undefined ? null : Number(t.max);
      if ((lo !== null && Number.isFinite(lo)) || (hi !== null && Number.isFinite(hi))) out.push([c, Number.isFinite(lo) ? lo : null, Number.isFinite(hi) ? hi : null]);
    }
    return out;
  }
  // filter_by_scores' rule: inclusive, a null fails unless --keep-missing, booleans as 0/1
  function passes(get, active) {
    for (const [c, lo, hi] of active) {
      const v = num(get(c));
      if (v === null) { if (!S.keepMissing) return false; continue; }
      if ((lo !== null && v < lo) || (hi !== null && v > hi)) return false;
    }
    return true;
  }
  function passCount(s, active) {
    if (s.all_scores) {
      let n = 0;
      for (let i = 0; i < s.rows; i++) if (passes((c) => s.all_scores[c][i], active)) n++;
      return [n, s.rows, true];
    }
    let n = 0;
    for (let p = 0; p < nRows(s); p++) if (passes((c) => value(s, c, p), active)) n++;
    return [n, nRows(s), false];
  }
  function command(active) {
    const parts = ['hf-judge filter', D.source];
    for (const [c, lo, hi] of active) {
      if (lo !== null) parts.push('--min ' + shq(c + '=' + lo));
      if (hi !== null) parts.push('--max ' + shq(c + '=' + hi));
    }
    if (S.keepMissing) parts.push('--keep-missing');
    if (splits.length > 1) parts.push('--split ' + shq(S.split));
    return parts.join(' ');
  }
  function haystack(s, p) {
    if (!s._hay) s._hay = [];
    if (s._hay[p] === undefined) s._hay[p] = Object.keys(s.columns).map((c) => fmt(s.columns[c][p])).join('\n').toLowerCase();
    return s._hay[p];
  }
  function visibleRows(s) {
    let rows = [...Array(nRows(s)).keys()];
    const q = S.search.trim().toLowerCase();
    if (q) rows = rows.filter((p) => haystack(s, p).includes(q));
    const active = activeThresholds();
    if (S.onlyPass && active.length) rows = rows.filter((p) => passes((c) => value(s, c, p), active));
    if (S.sort) {
      const col = S.sort, dir = S.desc ? -1 : 1;
      const key = col === '#' ? (p) => s.indices[p] : (p) => { const v = value(s, col, p); return typeof v === 'boolean' ? +v : v; };
      rows.sort((a, b) => {
        const x = key(a), y = key(b);
        if (x === null || x === undefined) return (y === null || y === undefined) ? a - b : 1;
        if (y === null || y === undefined) return -1;
        return x < y ? -dir : x > y ? dir : a - b;
      });
    }
    return rows;
  }

  // -- prompts ------------------------------------------------------------------------------------------------
  function promptOf(s, metric, p) {
    const entry = s.prompts[metric];
    if (!entry) return { none: 'no prompt recorded for ' + metric };
    if (entry.none) return { none: entry.none };
    const ref = entry.rows[p];
    if (typeof ref !== 'string') return ref;
    const skel = entry.skeletons[ref];
    if (!skel) return { none: 'this metric sends images: `hf-judge show-prompt` prints its messages' };
    const cut = [];
    const text = (c) => {
      if ((s.cut[c] || []).includes(p)) cut.push(c);
      const v = s.ptext[c] ? s.ptext[c][p] : s.columns[c][p];
      return v === null || v === undefined ? '' : String(v);
    };
    const messages = skel.map((msgs) => msgs.map((m) => ({ role: m.role, content: m.parts.map((x) => typeof x === 'string' ? x : text(x.c)).join('') })));
    return { messages, cut: [...new Set(cut)] };
  }

  // -- drawing ------------------------------------------------------------------------------------------------
  // a logprobs run's probability of each score value (read from the reply store by `view --cache-dir`), as bars
  function distributionBox(s, m, p, cols) {
    const L = D.logprobs || {};
    if (!L.ran || !cols.some((c) => /_(expected|p_positive)(__|$)/.test(c))) return null;
    const found = ((s.distributions || {}).by_metric || {})[m] || {};
    const entries = found[p] || [];
    if (!L.read) return el('p', { class: 'small muted dist-hint' }, `The probability of each value is in the run's reply store: hf-judge view ${D.source} --cache-dir DIR (the run's cache folder) shows it here.`);
    if (!entries.length) return el('p', { class: 'small muted dist-hint' }, 'No probability distribution for this row in the reply store read.');
    const out = el('div', { class: 'dists' }), two = entries.some((e) => e.order);
    for (const e of entries) {
      for (const [col, dist] of Object.entries(e.outputs)) {
        const total = Object.values(dist).reduce((a, b) => a + b, 0) || 1;
        const keys = Object.keys(dist).sort((a, b) => (isNaN(a) || isNaN(b) ? a.localeCompare(b) : Number(a) - Number(b)));
        const peak = Math.max(...keys.map((k) => dist[k]));
        const bars = keys.map((k) => {
          const bar = el('span', { class: 'bar' });
          bar.style.width = Math.max(1, Math.round(160 * dist[k] / peak)) + 'px';
          return el('div', { class: 'bar-row', 'data-value': k, 'data-p': dist[k] }, el('span', { class: 'bar-label' }, k), bar, el('span', { class: 'small' }, (100 * dist[k] / total).toFixed(1) + '%'));
        });
        // per judge the mean of its samples' distributions; a pairwise judge's second order: the responses swapped
        const how = [e.judge ? `judge ${e.judge}` : '', e.samples > 1 ? `mean of ${e.samples} samples` : '', two ? (e.order ? 'responses swapped' : 'order as written') : ''].filter((x) => x).join(', ');
        out.append(el('div', { class: 'dist', 'data-col': col, 'data-judge': e.judge, 'data-order': e.order || 0, 'data-samples': e.samples || 1 },
          el('div', { class: 'small muted' }, `${col}: probability of each value` + (how ? ` (${how})` : '')), bars));
      }
    }
    return out;
  }
  function histogram(title, stats) {
    const hist = stats.hist || {};
    // an object lists integer keys first ("3", "4", then "3.5"): numbers are put back in their order
    const keys = Object.keys(hist).every((k) => !isNaN(k)) ? Object.keys(hist).sort((a, b) => Number(a) - Number(b)) : Object.keys(hist);
    const W = 300, H = 120, pad = 18;
    const peak = Math.max(1, ...keys.map((k) => hist[k]));
    const bw = keys.length ? (W - 10) / keys.length : 0;
    const ns = 'http://www.w3.org/2000/svg';
    const svg = document.createElementNS(ns, 'svg');
    svg.setAttribute('width', W); svg.setAttribute('height', H); svg.setAttribute('class', 'hist');
    svg.setAttribute('role', 'img'); svg.setAttribute('aria-label', 'distribution of ' + title);
    keys.forEach((k, i) => {
      const h = (H - 2 * pad) * hist[k] / peak;
      const r = document.createElementNS(ns, 'rect');
      r.setAttribute('x', 5 + i * bw + 1); r.setAttribute('y', H - pad - h); r.setAttribute('width', Math.max(1, bw - 2)); r.setAttribute('height', h);
      const t = document.createElementNS(ns, 'title'); t.textContent = k + ': ' + hist[k]; r.append(t);
      svg.append(r);
      if (keys.length <= 12 || i % Math.ceil(keys.length / 12) === 0) {
        const lab = document.createElementNS(ns, 'text');
        lab.setAttribute('x', 5 + i * bw + bw / 2); lab.setAttribute('y', H - 4); lab.setAttribute('text-anchor', 'middle'); lab.textContent = k;
        svg.append(lab);
      }
    });
    return el('div', { class: 'card' }, el('strong', {}, title), el('div', { class: 'small muted' },
      `${int(stats.count)} scored, ${int(stats.null)} null` + (stats.mean !== undefined ? `, mean ${fmt(stats.mean)}` : '') + (stats.p50 !== undefined ? `, median ${fmt(stats.p50)}` : '')), svg);
  }
  // every judgment of a score column (each sample of each judge, hf_judge.results.pooled): a bar per judge and value
  const JUDGE_FILL = ['#54aeff', '#f0883e', '#4ac26b', '#e5534b', '#986ee2', '#a5814c', '#db61a2', '#8c959f'];
  function svgEl(tag, attrs) { const e = document.createElementNS('http://www.w3.org/2000/svg', tag); for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v); return e; }
  function pooledCard(col, p) {
    const judges = Object.keys(p.judges), W = 300, H = 120, pad = 18;
    // numbers in their order (an object lists integer keys before "2.5"), else as given ("1", "2", "tie")
    const keys = Object.keys(p.hist).every((k) => !isNaN(k)) ? Object.keys(p.hist).sort((a, b) => Number(a) - Number(b)) : Object.keys(p.hist);
    const peak = Math.max(1, ...judges.flatMap((j) => keys.map((k) => p.judges[j].hist[k] || 0)));
    const gw = keys.length ? (W - 10) / keys.length : 0, bw = Math.max(1, (gw - 2) / judges.length);
    const svg = svgEl('svg', { width: W, height: H, class: 'hist pooled', role: 'img', 'aria-label': 'every judgment of ' + col });
    keys.forEach((k, i) => {
      judges.forEach((j, n) => {
        const c = p.judges[j].hist[k] || 0, h = (H - 2 * pad) * c / peak;
        const r = svgEl('rect', { x: 5 + i * gw + 1 + n * bw, y: H - pad - h, width: bw, height: h, 'data-col': col, 'data-judge': j, 'data-value': k, 'data-count': c });
        r.style.fill = JUDGE_FILL[n % JUDGE_FILL.length];
        const t = svgEl('title', {}); t.textContent = (j ? j + ', ' : '') + k + ': ' + c; r.append(t);
        svg.append(r);
      });
      if (keys.length <= 12 || i % Math.ceil(keys.length / 12) === 0) {
        const lab = svgEl('text', { x: 5 + i * gw + gw / 2, y: H - 4, 'text-anchor': 'middle' }); lab.textContent = k; svg.append(lab);
      }
    });
    const js = judges.map((j) => p.judges[j]);
    const multi = js.reduce((a, j) => a + (j.multi || 0), 0), agree = js.reduce((a, j) => a + (j.agree || 0), 0);
    const missing = js.reduce((a, j) => a + (j.missing || 0), 0);
    const lines = [`${int(p.values)} judgments` + (judges.length > 1 ? ` by ${judges.length} judges` : '') + (missing ? `, ${int(missing)} samples missing` : '')];
    if (multi) {
      const spread = {};
      for (const j of js) for (const [k, n] of Object.entries(j.spread || {})) spread[k] = (spread[k] || 0) + n;
      const by = Object.keys(spread).filter((k) => k !== '0').sort((a, b) => Number(a) - Number(b)).map((k) => `${int(spread[k])} by ${k}`).join(', ');
      lines.push(`a ${judges.length > 1 ? 'judge\'s' : 'row\'s'} samples agree on ${int(agree)} of ${int(multi)} ${judges.length > 1 ? 'rows x judges' : 'rows'}` + (by ? `; they differ ${by}` : ''));
    }
    if (/_disagree$/.test(col) && p.hist.true !== undefined) lines.push(`the two orders chose different winners (position bias) in ${int(p.hist.true)} of ${int(p.values)}`);
    const legend = judges.length > 1 ? el('div', { class: 'small legend' }, judges.map((j, n) => { const b = el('span', { class: 'swatch' }); b.style.background = JUDGE_FILL[n % JUDGE_FILL.length]; return el('span', {}, b, j + ' '); })) : null;
    return el('div', { class: 'card', 'data-pooled': col }, el('strong', {}, col), lines.map((t) => el('div', { class: 'small muted' }, t)), svg, legend);
  }
  // a pairwise judge's winner as written against its winner with the responses swapped (read from the reply store)
  function ordersCard(metric, judge, o) {
    const W = ['1', '2', 'tie'], peak = Math.max(1, ...W.flatMap((a) => W.map((b) => (o.pairs[a] || {})[b] || 0)));
    const rows = W.map((a) => [el('th', {}, `${a}`), ...W.map((b) => {
      const n = (o.pairs[a] || {})[b] || 0, td = el('td', { class: 'num', 'data-written': a, 'data-swapped': b, 'data-count': n }, int(n));
      td.style.background = n ? `rgba(84, 174, 255, ${(0.15 + 0.6 * n / peak).toFixed(2)})` : '';
      return td;
    })]);
    const head = el('tr', {}, el('th', {}, 'as written \\ swapped'), W.map((b) => el('th', {}, b)));
    return el('div', { class: 'card orders', 'data-metric': metric, 'data-judge': judge },
      el('strong', {}, metric + (judge ? ` (judge ${judge})` : '')),
      el('div', { class: 'small muted' }, `${int(o.judgments)} judgments in both orders: the response shown first won both in ${int(o.first_shown)}, the one shown second in ${int(o.second_shown)}`),
      el('table', { class: 'orders-table' }, el('thead', {}, head), el('tbody', {}, rows.map((r) => el('tr', {}, r)))));
  }
  // a panel's judge-vs-judge agreement (the summary's figures, as the table below it shows them): a heat map per split,
  // a row per score column, a column per pair of judges, the share of rows both gave the same value
  function agreementMap(agreement) {
    const out = [];
    for (const [split, byMetric] of Object.entries(agreement || {})) {
      const cols = Object.values(byMetric || {}).flatMap((m) => Object.entries(m || {}));
      const pairs = [...new Set(cols.flatMap(([, a]) => Object.keys(a.pairs || {})))];
      if (!cols.length || !pairs.length) continue;
      const cw = 84, ch = 24, left = 200, top = 22, W = left + cw * pairs.length + 10, H = top + ch * cols.length + 4;
      const svg = svgEl('svg', { width: W, height: H, class: 'heat', role: 'img', 'aria-label': `judges' agreement: ${split}` });
      pairs.forEach((pr, j) => { const t = svgEl('text', { x: left + j * cw + cw / 2, y: 14, 'text-anchor': 'middle' }); t.textContent = pr.replace('~', ' ~ '); svg.append(t); });
      cols.forEach(([col, a], i) => {
        const t = svgEl('text', { x: left - 6, y: top + i * ch + ch / 2 + 4, 'text-anchor': 'end' });
        t.textContent = col + (typeof a.alpha === 'number' ? ` (α ${a.alpha.toFixed(2)})` : ''); svg.append(t);
        pairs.forEach((pr, j) => {
          const e = (a.pairs || {})[pr] || {}, v = typeof e.exact === 'number' ? e.exact : null;
          const r = svgEl('rect', { x: left + j * cw, y: top + i * ch, width: cw - 2, height: ch - 2, 'data-split': split, 'data-col': col, 'data-pair': pr, 'data-value': v === null ? '' : v });
          // red (0) through yellow to green (1): a low cell is a column the judges read differently
          r.style.fill = v === null ? '#eee' : `hsl(${Math.round(120 * v)}, 65%, ${Math.round(72 - 12 * v)}%)`;
          const tip = svgEl('title', {}); tip.textContent = `${col}, ${pr}: ${v === null ? 'no rows' : (100 * v).toFixed(1) + '% same value'} over ${int(e.rows)} rows` + (typeof e.mean_abs_diff === 'number' ? `, mean |difference| ${fmt(e.mean_abs_diff)}` : '');
          r.append(tip); svg.append(r);
          const lab = svgEl('text', { x: left + j * cw + cw / 2 - 1, y: top + i * ch + ch / 2 + 3, 'text-anchor': 'middle', class: 'cell' });
          lab.textContent = v === null ? 'n/a' : Math.round(100 * v) + '%' + (typeof e.mean_abs_diff === 'number' ? ` · Δ${fmt(e.mean_abs_diff)}` : ''); svg.append(lab);
        });
      });
      out.push(el('div', { class: 'card heatmap', 'data-split': split }, el('strong', {}, `Judges' agreement: ${split}`), el('div', { class: 'small muted' }, 'share of rows both judges gave the same value (Δ: their mean absolute difference)'), svg));
    }
    return out.length ? el('div', { class: 'grid' }, out) : null;
  }
  const flat = (v) => v !== null && typeof v === 'object' && !Array.isArray(v) && Object.values(v).every((x) => x === null || typeof x !== 'object');
  function figure(value) {
    if (value === null || typeof value !== 'object') return fmt(value);
    if (Array.isArray(value)) return value.every((v) => v === null || typeof v !== 'object') ? value.map(fmt).join(', ') : el('div', {}, value.map(figure));
    const entries = Object.entries(value);
    if (entries.length && entries.every(([, v]) => flat(v))) { // per column, the same figures (length bias, longer wins): a table
      const keys = [...new Set(entries.flatMap(([, v]) => Object.keys(v)))];
      return table(['', ...keys], entries.map(([k, v]) => [k, ...keys.map((x) => fmt(v[x]))]), { class: 'figures' });
    }
    return kv(entries.map(([k, v]) => [k, figure(v)]));
  }
  function calibrationAndPictures(o) {
    const out = [], cals = o.calibrations || [], pics = (o.pictures || {}).items || [];
    if (cals.length) out.push(el('h2', {}, 'Calibration'));
    for (const c of cals) { // one per score the folder holds a calibration of
      out.push(kv([['score', c.column && c.column !== c.score ? `${c.score} (reads ${c.column})` : c.score], ['labels', c.label], ['kind', c.kind], ['pairs', int(c.pairs)],
        ['calibration error (ECE)', c.ece ? `judge ${fmt(c.ece.judge)}, calibrated ${fmt(c.ece.calibrated)} (out of fold)` : ''],
        ['threshold', c.threshold ? figure(c.threshold) : ''], ['cross-validated', c.cv && Object.keys(c.cv).length ? figure(c.cv) : '']]));
    }
    if (pics.length || (o.pictures || {}).left_out) {
      out.push(el('h2', {}, 'Pictures'));
      out.push(el('div', { class: 'grid pictures' }, pics.map((p) => el('figure', { class: 'card', 'data-name': p.name },
        // a click shows it full size (a data: URL cannot be opened in a tab of its own)
        el('img', { src: p.src, alt: p.title, title: 'click: full size', onclick: (e) => e.target.classList.toggle('full') }), el('figcaption', { class: 'small muted' }, p.name)))));
      if (o.pictures.left_out) out.push(el('p', { class: 'muted' }, `${int(o.pictures.left_out)} more PNG(s) in the result folder, left out of the page (size cap)`));
    }
    return out;
  }

  // choose-judge's table (choose_judge.json): a bar per judge, its headline figure over all labelled rows, with its
  // bootstrap interval as a whisker; the recommended judge's bar in a colour of its own, the human ceiling dashed
  function choiceSection(c) {
    // a judge without a figure (none, or NaN in a hand-edited file: null here) has no bar, and "-" in the table
    const all = c.entries || [], entries = all.filter((e) => typeof e.score === 'number'), pick = (c.recommendation || {}).name;
    if (!all.length) return [];
    const pct = c.kind !== 'numeric', show = (v) => typeof v !== 'number' ? '-' : pct ? (100 * v).toFixed(1) + '%' : fmt(v);
    const lo = pct ? 0 : Math.min(0, ...entries.map((e) => (e.interval || [e.score])[0])), hi = 1;
    const left = 170, W = 640, bh = 22, top = 8, H = top + bh * entries.length + 22;
    const x = (v) => left + (W - left - 60) * (v - lo) / (hi - lo || 1);
    const svg = svgEl('svg', { width: W, height: H, class: 'choice-bars', role: 'img', 'aria-label': `judges' ${c.headline} with intervals` });
    entries.forEach((e, i) => {
      const y = top + i * bh, g = svgEl('g', { class: 'choice-bar' + (e.name === pick ? ' recommended' : ''), 'data-judge': e.name, 'data-score': e.score, 'data-lo': e.interval ? e.interval[0] : '', 'data-hi': e.interval ? e.interval[1] : '' });
      const name = svgEl('text', { x: left - 6, y: y + bh / 2 + 4, 'text-anchor': 'end' }); name.textContent = e.name + (e.name === pick ? ' ★' : ''); g.append(name);
      const bar = svgEl('rect', { x: x(Math.min(0, e.score)), y: y + 3, width: Math.abs(x(e.score) - x(0)), height: bh - 6 });
      bar.style.fill = e.name === pick ? '#f0883e' : '#54aeff'; g.append(bar);
      if (e.interval) {
        const [a, b] = e.interval.map(x), m = y + bh / 2;
        for (const [x1, y1, x2, y2] of [[a, m, b, m], [a, m - 5, a, m + 5], [b, m - 5, b, m + 5]]) g.append(svgEl('line', { x1, y1, x2, y2, stroke: '#24292f', 'stroke-width': 1.5, class: 'whisker' }));
      }
      const t = svgEl('title', {}); t.textContent = `${e.name}: ${c.headline} ${show(e.score)}` + (e.interval ? `, 95% interval ${show(e.interval[0])} to ${show(e.interval[1])}` : ''); g.append(t);
      const v = svgEl('text', { x: x(Math.max(e.score, e.interval ? e.interval[1] : e.score)) + 6, y: y + bh / 2 + 4 }); v.textContent = show(e.score); g.append(v);
      svg.append(g);
    });
    const ceiling = (c.ceiling || {}).loo_agreement;
    if (pct && typeof ceiling === 'number') {
      svg.append(svgEl('line', { x1: x(ceiling), x2: x(ceiling), y1: top, y2: H - 20, stroke: '#4ac26b', 'stroke-dasharray': '4 3', class: 'ceiling' }));
      const t = svgEl('text', { x: x(ceiling), y: H - 6, 'text-anchor': 'middle' }); t.textContent = 'human ceiling ' + show(ceiling); svg.append(t);
    }
    const money = (v) => typeof v === 'number' ? '$' + v.toPrecision(3) : '';
    const checks = choiceChecks(all);
    const r = c.recommendation;
    return [el('h2', {}, 'Choosing the judge'),
      el('p', { class: 'small muted' }, `${c.metric} (${c.kind}) on ${int(c.rows)} labelled rows; a row a judge did not decide counts as not agreeing. ` + (r && r.name ? `Recommended: ${r.name} (${r.rule}).` : r ? 'Nothing recommended: no candidate is fit (none can be told from chance on these labels).' : '')),
      el('div', { class: 'card choice', id: 'choice' }, svg),
      table(['judge', c.headline, '95% interval', 'coverage', ...checks.head, '$/1k rows', '$/1k batch', 'p95 s'], all.map((e) => [e.name, show(e.score),
        e.interval ? `${show(e.interval[0])} to ${show(e.interval[1])}` : '', typeof e.coverage !== 'number' ? '-' : (100 * e.coverage).toFixed(1) + '%',
        ...checks.cells(e), money(e.cost_per_1000), money(e.cost_per_1000_batch), fmt(e.latency_p95_s)]), { class: 'choice-table' }),
      ...choiceGroups(c, show)];
  }

  // the checks that need no labels, side by side where the table has them: the share of pairs whose two orders
  // disagree (a pairwise judge asked in both orders), and the intransitive triads (A over B, B over C, C over A)
  function choiceChecks(all) {
    const orders = all.some((e) => typeof e.orders_disagree === 'number'), cycles = all.some((e) => e.transitivity && e.transitivity.triads);
    const cyc = (t) => !t || !t.triads ? '-' : `${int(t.violations)} of ${int(t.triads)} triads`;
    return {
      head: [...(orders ? ['orders disagree'] : []), ...(cycles ? ['intransitive'] : [])],
      cells: (e) => [...(orders ? [typeof e.orders_disagree !== 'number' ? '-' : (100 * e.orders_disagree).toFixed(0) + '%'] : []), ...(cycles ? [cyc(e.transitivity)] : [])],
    };
  }

  // choose-judge --by COLUMN: a row per group, its best judge, each judge's figure with its interval on that group's
  // rows alone (the recommendation above stays overall); the groups past the cap summed up as "N more groups"
  function choiceGroups(c, show) {
    const G = c.groups;
    if (!G || !(G.groups || []).length) return [];
    const names = (c.entries || []).map((e) => e.name), cell = (e) => !e || typeof e.score !== 'number' ? '-' : show(e.score) + (e.interval ? ` (${show(e.interval[0])} to ${show(e.interval[1])})` : '');
    // the people's own figure per group, where the labels are people's votes and the rule compares with them
    const humans = G.groups.some((g) => g.humans && typeof g.humans.score === 'number');
    const rows = G.groups.map((g) => [g.name, int(g.rows), g.best ? g.best + ((g.fit || []).includes(g.best) ? '' : ' (not beyond chance)') : '-',
      typeof g.chance === 'number' ? show(g.chance) : '-', ...(humans ? [cell(g.humans)] : []),
      ...names.map((n) => cell((g.entries || []).find((e) => e.name === n)))]);
    if (G.more) rows.push([el('em', { class: 'muted' }, `${int(G.more)} more group${G.more === 1 ? '' : 's'} (${int(G.more_rows)} rows)`), '', '', '', ...(humans ? [''] : []), ...names.map(() => '')]);
    return [el('h3', {}, `Judges by ${G.by}`),
      el('p', { class: 'small muted' }, `${c.headline} per value of ${G.by}, each group's figure that of its rows alone, with its 95% interval, beside the group's chance level` + (humans ? ' and the people\'s own figure' : '') + '; the recommendation above is overall.'),
      table([G.by, 'rows', 'best', 'chance', ...(humans ? ['humans'] : []), ...names], rows, { class: 'choice-groups' })];
  }

  // a panel is judged by every judge's model, not the first one's
  function judgedBy(o) {
    const judges = (o.sampling && o.sampling.judges) || [];
    return judges.length > 1 ? [...new Set(judges.map((j) => j.model))].join(', ') : o.model;
  }

  // the scores by group (hf_judge.results.groups): every row of the split counted, the groups sorted in Python
  function groupTables(tables) {
    if (!tables.length) return [];
    const by = tables[0].by;
    return [el('h3', {}, `Scores by ${by}`),
      el('p', { class: 'small muted' }, `Each score per value of ${by}, over every row of the split (not only those in this page).`),
      el('div', { class: 'grid' }, tables.map((t) => el('div', { class: 'card groups', 'data-column': t.column },
        el('strong', {}, t.column), el('span', { class: 'small muted' }, ` (${t.order})`),
        table([by, 'rows', 'nulls', 'mean', 'median', 'histogram'], [
          ...t.groups.map((g) => [g.name, int(g.rows), int(g.nulls), g.mean === null ? '' : g.mean.toFixed(2), g.median === null ? '' : g.median.toFixed(2), el('code', {}, g.histogram)]),
          ...(t.more ? [[el('em', { class: 'muted' }, t.more_text), '', '', '', '', '']] : []),
        ], { class: 'groups-table' }))))];
  }

  // splits none of whose rows got a score: say so first, and where the reasons are (not only empty histograms)
  function failedBanner() {
    const E = D.errors, some = (n) => E.rows.some((e) => e.split === n) || E.rows.length < E.total;
    const failed = splits.filter((n) => { const s = D.splits[n]; return s.rows > 0 && s.scores.every((c) => !((s.stats[c] || {}).count)) && some(n); });
    if (!failed.length) return null;
    const kinds = Object.entries(D.errors.by_kind).map(([k, n]) => `${k} ${int(n)}`).join(', ');
    return el('div', { class: 'banner', id: 'all-failed' }, el('strong', {}, `Every row failed in ${failed.join(', ')}: no score was written.`),
      ' ', `${int(D.errors.total)} error rows` + (kinds ? ` (${kinds})` : '') + ' say why: see the ',
      el('a', { href: '#', id: 'all-failed-errors', onclick: (e) => { e.preventDefault(); go('errors'); } }, 'Errors tab'),
      ', or the result\'s errors split (', el('code', {}, 'load_dataset(..., "errors")'), ').');
  }

  function overview() {
    const o = D.overview, out = [failedBanner()];
    // a run the budget stopped: its nulls are requests never sent, not the judge's failures
    if (o.stopped) out.push(el('div', { class: 'banner', id: 'stopped' }, el('strong', {}, 'This result is incomplete. '), o.stopped.replace(/^INCOMPLETE: /, '')));
    if (o.choice) out.push(...choiceSection(o.choice));
    if (!o.model) out.push(el('p', { class: 'muted' }, 'No summary.json with this result: the run\'s details are unknown.'));
    else {
      const t = o.totals || {};
      const judges = (o.sampling && o.sampling.judges) ? o.sampling.judges.map((j) => `${j.name} (${j.model})`).join(', ') : '';
      out.push(kv([
        ['model', judgedBy(o) + (o.host ? ' at ' + o.host : '')], ['judges', judges], ['source', o.source], ['recipe', o.recipe],
        ['rows scored', Object.entries(o.rows || {}).map(([k, v]) => `${k}: ${int(v)}`).join(', ')],
        ['requests', `${int(t.requests)} (${int(t.retries)} retries) over ${new Set((o.runs || []).map((r) => r.id)).size || 1} run(s)`],
        ['tokens', `${int(t.prompt_tokens)} in / ${int(t.completion_tokens)} out`],
        ['cost', o.cost === null || o.cost === undefined ? '' : '$' + o.cost.toFixed(4)],
        ['output format', o.structured_output],
        ['sampling', Object.entries(o.sampling || {}).filter(([k]) => k !== 'judges').map(([k, v]) => `${k}=${v === null ? 'none' : fmt(v)}`).join(', ')],
        ['filtered', o.filters && o.filters.min ? JSON.stringify({ min: o.filters.min, max: o.filters.max, keep_groups: o.filters.keep_groups, drop_groups: o.filters.drop_groups }) : ''],
      ]));
      const notes = o.notes || [], cut = o.left_out || [];
      if (notes.length || cut.length) { // what the run said of itself (a stop at the budget, a cache left out), and what this page cut
        out.push(el('h2', {}, 'Notes'));
        out.push(el('ul', { class: 'notes' }, notes.map((n) => el('li', {}, n)), cut.map((c) => el('li', { class: 'muted' }, `left out of this page: ${c} (summary.json holds it)`))));
      }
      out.push(el('h2', {}, 'Metrics and prompts'));
      out.push(table(['metric', 'prompt file', 'sha256', 'params'], Object.keys(o.metrics || {}).map((m) => {
        const p = (o.prompts || {})[m] || {};
        return [m, p.file || '', el('code', { class: 'small' }, p.sha256 || o.metrics[m]), p.params && Object.keys(p.params).length ? JSON.stringify(p.params) : ''];
      })));
      out.push(el('h2', {}, 'Columns judged'));
      out.push(table(['template variable', 'column'], Object.entries(o.column_mapping || {}).map(([k, v]) => [k, v])));
    }
    for (const name of splits) {
      const s = D.splits[name];
      out.push(el('h2', {}, `Scores: ${name} (${int(s.rows)} rows)`));
      const pooled = Object.entries(s.pooled || {});
      if (pooled.length) { // samples or a panel: every judgment first, then each column the run wrote
        out.push(el('h3', {}, 'Every judgment'), el('p', { class: 'small muted' }, 'Each sample of each judge counted per value (a score column holds a row\'s mean over its samples and judges).'));
        out.push(el('div', { class: 'grid' }, pooled.map(([c, p]) => pooledCard(c, p))));
      }
      const orders = Object.entries(s.orders || {});
      if (orders.length) {
        out.push(el('h3', {}, 'Both orders'), el('p', { class: 'small muted' }, 'The winner (in the responses\' own labels) when the prompt shows them as written, against when it shows them swapped, from the reply store, over the rows in this page: off the diagonal, the judge changed its mind with the order; "1" then "2" is the response shown first winning both times.'));
        out.push(el('div', { class: 'grid' }, orders.flatMap(([m, by]) => Object.entries(by).map(([j, o]) => ordersCard(m, j, o)))));
      }
      if (pooled.length || orders.length) out.push(el('h3', {}, 'Each score column'));
      out.push(el('div', { class: 'grid' }, s.scores.map((c) => histogram(c, s.stats[c] || {}))));
      out.push(...groupTables((o.groups || []).filter((t) => t.split === name)));
    }
    out.push(el('h2', {}, 'Errors'));
    const kinds = Object.entries(D.errors.by_kind);
    out.push(kinds.length ? table(['kind', 'rows'], kinds.map(([k, n]) => [el('a', { href: '#', onclick: (e) => { e.preventDefault(); S.kind = k; go('errors'); } }, k), int(n)])) : el('p', { class: 'muted' }, 'none'));
    for (const [k, v] of Object.entries(o.figures || {})) { out.push(el('h2', {}, (k[0].toUpperCase() + k.slice(1)).replaceAll('_', ' '))); if (k === 'agreement') out.push(agreementMap(v)); out.push(figure(v)); }
    out.push(...calibrationAndPictures(o));
    if ((o.runs || []).length) {
      out.push(el('h2', {}, 'Runs'));
      out.push(table(['run', 'started', 'split', 'requests', 'from cache', 'tokens in', 'tokens out', 's'], o.runs.map((r) => [r.id, r.started, r.split, int(r.requests), int(r.cache_hits), int(r.prompt_tokens), int(r.completion_tokens), fmt(r.elapsed_s)])));
    }
    return out;
  }

  function thresholdPanel(s) {
    const t = thresholds();
    const inputs = s.scores.map((c) => {
      const cur = t[c] || (t[c] = {});
      const st = s.stats[c] || {};
      const inp = (which) => el('input', { type: 'number', step: 'any', id: `${which}-${c}`, 'data-col': c, placeholder: which === 'min' ? fmt(st.min) : fmt(st.max), value: cur[which] ?? '',
        oninput: (e) => { cur[which] = e.target.value; S.page = 0; updateCount(); if (S.onlyPass) drawTable(); } });
      return el('label', {}, el('span', { title: c }, c), 'min', inp('min'), 'max', inp('max'));
    });
    return el('details', { open: s.scores.length <= 12 || activeThresholds().length > 0 }, el('summary', {}, `Thresholds on ${s.scores.length} score columns (inclusive, as hf-judge filter)`),
      el('div', { class: 'thresholds' }, inputs),
      el('div', { class: 'controls' },
        el('label', {}, el('input', { type: 'checkbox', id: 'keep-missing', checked: S.keepMissing, onchange: (e) => { S.keepMissing = e.target.checked; updateCount(); drawTable(); } }), ' keep rows whose score is null'),
        el('label', {}, el('input', { type: 'checkbox', id: 'only-pass', checked: S.onlyPass, onchange: (e) => { S.onlyPass = e.target.checked; S.page = 0; drawTable(); } }), ' show only the rows that pass')),
      el('div', { id: 'pass-count' }), el('code', { class: 'cmd', id: 'filter-command' }));
  }
  function updateCount() {
    const s = sp(), active = activeThresholds();
    const [n, of, all] = passCount(s, active);
    const box = document.getElementById('pass-count');
    if (!box) return;
    box.textContent = active.length ? `${int(n)} of ${int(of)} rows pass` + (all ? '' : ' (of the rows embedded in this page)') : 'no threshold set';
    box.setAttribute('data-pass', n);
    document.getElementById('filter-command').textContent = active.length ? command(active) : 'hf-judge filter ' + D.source + ' --min COLUMN=V';
  }

  function rowsTab() {
    const s = sp(), out = [];
    if (splits.length > 1) out.push(el('label', {}, 'split ', el('select', { id: 'split', onchange: (e) => { S.split = e.target.value; S.page = 0; S.sort = null; draw(); } }, splits.map((n) => el('option', { value: n, selected: n === S.split }, n)))));
    const left = s.rows - nRows(s);
    out.push(el('p', { class: 'muted', id: 'embedded' }, left > 0
      ? `This page holds ${int(nRows(s))} of ${int(s.rows)} rows (${int(left)} left out; caps: ${int(D.caps.rows)} rows, ${int(D.caps.chars)} characters of text): ` + Object.entries(s.reasons).map(([k, v]) => `${k} ${int(v)}`).join(', ') + '. Distributions and threshold counts cover every row.'
      : `All ${int(s.rows)} rows. Texts longer than ${int(D.caps.text)} characters are cut.`));
    out.push(el('div', { class: 'controls' }, el('input', { type: 'search', id: 'search', placeholder: 'search the text', value: S.search, size: 40, oninput: (e) => { S.search = e.target.value; S.page = 0; drawTable(); } })));
    if (s.scores.length) out.push(thresholdPanel(s));
    out.push(el('div', { id: 'table' }));
    return out;
  }
  function drawTable() {
    const box = document.getElementById('table');
    if (!box) return;
    const s = sp(), rows = visibleRows(s);
    const pages = Math.max(1, Math.ceil(rows.length / PAGE));
    S.page = Math.min(S.page, pages - 1);
    const shown = rows.slice(S.page * PAGE, (S.page + 1) * PAGE);
    const active = activeThresholds();
    const texts = s.judged.length ? s.judged : Object.keys(s.columns).filter((c) => !s.scores.includes(c)).slice(0, 2);
    const head = ['#', ...texts, ...s.scores].map((c) => el('th', { 'data-col': c, title: 'sort by ' + c,
      onclick: () => { if (S.sort === c) S.desc = !S.desc; else { S.sort = c; S.desc = false; } drawTable(); } }, c + (S.sort === c ? (S.desc ? ' ▼' : ' ▲') : '')));
    const body = shown.map((p) => el('tr', { 'data-row': s.indices[p], class: [active.length && !passes((c) => value(s, c, p), active) ? 'fails' : '', p === S.open ? 'open' : ''].join(' ').trim() || null, onclick: () => openRow(p) },
      el('td', { class: 'num' }, s.indices[p]),
      texts.map((c) => el('td', { class: 'text' }, fmt(value(s, c, p)).slice(0, 200))),
      s.scores.map((c) => el('td', { class: 'num', 'data-col': c }, fmt(value(s, c, p))))));
    box.replaceChildren(
      el('div', { class: 'pager' }, el('button', { id: 'prev', disabled: S.page === 0, onclick: () => { S.page--; drawTable(); } }, '‹ prev'),
        `page ${S.page + 1} of ${pages} (${int(rows.length)} rows)`,
        el('button', { id: 'next', disabled: S.page >= pages - 1, onclick: () => { S.page++; drawTable(); } }, 'next ›')),
      el('table', { class: 'rows', id: 'rows' }, el('thead', {}, el('tr', {}, head)), el('tbody', {}, body)));
  }

  function labelBox(s, p) {
    const row = s.indices[p];
    const pick = el('select', { id: 'label-score' }, s.scores.map((c) => el('option', { value: c }, c)));
    const keyOf = () => `${S.split}:${row}:${pick.value}`;
    const val = el('input', { type: 'number', id: 'label-value', min: 1, max: 10, step: 'any', placeholder: '1-10' });
    const note = el('input', { type: 'text', id: 'label-note', placeholder: 'note (optional)' });
    const status = el('span', { class: 'small muted', id: 'label-status' });
    let verdict = null;
    // every change is saved as it is made (a verdict's click, a value typed, a note): nothing waits for a button
    // a reviewer might not press, so closing the row or the page loses no label
    const good = el('button', { class: 'good', id: 'label-good', title: 'saved at once', onclick: () => { verdict = true; val.value = ''; sync(); commit(); } }, '✓ good');
    const bad = el('button', { class: 'bad', id: 'label-bad', title: 'saved at once', onclick: () => { verdict = false; val.value = ''; sync(); commit(); } }, '✗ bad');
    function sync() { good.classList.toggle('on', verdict === true); bad.classList.toggle('on', verdict === false); }
    function show() {
      const l = LABELS[keyOf()];
      verdict = l && typeof l.label === 'boolean' ? l.label : null;
      val.value = l && typeof l.label === 'number' ? l.label : '';
      note.value = l ? (l.note || '') : '';
      status.textContent = l ? 'saved' : 'not labelled';
      status.setAttribute('data-saved', l ? '1' : '0');
      sync();
    }
    function commit(asked) {
      const label = val.value !== '' ? Number(val.value) : verdict;
      if (label === null || (typeof label === 'number' && !Number.isFinite(label))) {
        if (asked) status.textContent = 'give a 1-10 label or a verdict';
        return;
      }
      const l = { ...LABELS };
      l[keyOf()] = { split: S.split, row, score: pick.value, label, note: note.value || null, reviewer: reviewer() || null,
        text: fmt(value(s, s.judged[0] || Object.keys(s.columns)[0], p)).slice(0, 500), judge_score: value(s, pick.value, p) ?? null };
      saveLabels(l); status.textContent = 'saved (' + Object.keys(l).length + ' labels)';
      status.setAttribute('data-saved', '1');
    }
    pick.addEventListener('change', show);
    val.addEventListener('input', () => { verdict = null; sync(); commit(); });
    note.addEventListener('input', () => commit());
    const save = el('button', { id: 'label-save', onclick: () => commit(true) }, 'save label');
    const clear = el('button', { id: 'label-clear', onclick: () => { const l = { ...LABELS }; delete l[keyOf()]; saveLabels(l); show(); } }, 'remove');
    show();
    return el('div', { class: 'labelbox' }, el('strong', {}, 'Your label '), 'for ', pick, ' ', val, ' or ', good, bad, ' ', note, ' ', save, clear, ' ', status);
  }

  function openRow(p) {
    S.open = p;
    document.querySelectorAll('#rows tr.open').forEach((tr) => tr.classList.remove('open'));
    const tr = document.querySelector(`#rows tr[data-row='${sp().indices[p]}']`);
    if (tr) tr.classList.add('open');
    const s = sp(), d = document.getElementById('detail'), row = s.indices[p];
    const kids = [el('button', { class: 'close', id: 'detail-close', onclick: () => { d.hidden = true; S.open = null; document.querySelectorAll('#rows tr.open').forEach((x) => x.classList.remove('open')); } }, '×'),
      el('h2', {}, `Row ${row} (${S.split})`), labelBox(s, p)];
    for (const c of s.judged) {
      const cut = (s.cut[c] || []).includes(p);
      kids.push(el('h3', {}, c), el('pre', { class: 'judged', 'data-col': c }, fmt(value(s, c, p))));
      if (cut) kids.push(el('div', { class: 'small warn' }, `cut at ${int(D.caps.text)} characters in this page`));
    }
    const owned = new Set();
    for (const [m, cols] of Object.entries(s.metrics)) {
      cols.forEach((c) => owned.add(c));
      const box = el('div', { class: 'metric', 'data-metric': m }, el('h3', {}, m));
      const main = cols.find((c) => c === m);
      if (main) box.append(el('div', { class: 'score' }, `${main}: ${fmt(value(s, main, p))}`));
      // the metric's own reason as text; a judge's or a sample's beside the other values
      const reasons = cols.filter((c) => typeof value(s, c, p) === 'string' && !c.includes('__') && /(reason|explanation|rationale)$/i.test(c));
      reasons.forEach((c) => box.append(el('div', { class: 'small muted' }, c), el('pre', { class: 'reason', 'data-col': c }, value(s, c, p))));
      const rest = cols.filter((c) => c !== main && !reasons.includes(c));
      if (rest.length) box.append(kv(rest.map((c) => [c, fmt(value(s, c, p))])));
      const dist = distributionBox(s, m, p, cols);
      if (dist) box.append(dist);
      const pr = promptOf(s, m, p);
      const det = el('details', { class: 'prompt', 'data-metric': m, open: true }, el('summary', {}, 'Prompt as sent'));
      if (pr.none) det.append(el('p', { class: 'warn prompt-none' }, 'Cannot show the prompt: ' + pr.none));
      else {
        pr.messages.forEach((msgs, i) => {
          if (pr.messages.length > 1) det.append(el('div', { class: 'small muted' }, `request ${i + 1} of ${pr.messages.length}` + (i ? ' (the answers swapped)' : '')));
          msgs.forEach((msg) => det.append(el('div', { class: 'msg-role' }, msg.role), el('pre', { class: 'prompt-message', 'data-role': msg.role, 'data-request': i }, msg.content)));
        });
        if (pr.cut && pr.cut.length) det.append(el('div', { class: 'small warn' }, `the value of ${pr.cut.join(', ')} is cut in this page: hf-judge show-prompt ${D.source} --row ${row} --metric ${shq(m)}${splits.length > 1 ? ' --split ' + shq(S.split) : ''} prints it whole`));
      }
      box.append(det);
      kids.push(box);
    }
    const errs = D.errors.rows.filter((e) => e.split === S.split && e.row === row);
    if (errs.length) kids.push(el('h3', {}, 'Errors'), table(['metric', 'kind', 'message'], errs.map((e) => [e.metric, e.kind, e.message])));
    const other = Object.keys(s.columns).filter((c) => !owned.has(c) && !s.judged.includes(c));
    if (other.length) kids.push(el('h3', {}, 'Other columns'), kv(other.map((c) => [c, fmt(value(s, c, p))])));
    d.replaceChildren(...kids);
    d.hidden = false;
    d.scrollTop = 0;
  }

  function errorsTab() {
    const E = D.errors, out = [];
    if (!E.total) return [el('p', { class: 'muted' }, 'No errors: every (row, metric) was scored.')];
    out.push(el('p', {}, `${int(E.total)} error rows` + (E.rows.length < E.total ? ` (the first ${int(E.rows.length)} in this page)` : '') + '. Load them with ', el('code', {}, 'load_dataset(..., "errors")'), ' or the saved folder\'s errors split.'));
    out.push(el('label', {}, 'kind ', el('select', { id: 'error-kind', onchange: (e) => { S.kind = e.target.value; draw(); } },
      el('option', { value: '' }, 'all'), Object.entries(E.by_kind).map(([k, n]) => el('option', { value: k, selected: k === S.kind }, `${k} (${int(n)})`)))));
    const rows = E.rows.filter((e) => !S.kind || e.kind === S.kind).slice(0, 1000);
    out.push(el('table', { id: 'errors' }, el('thead', {}, el('tr', {}, ['split', 'row', 'metric', 'judge', 'kind', 'attempts', 'message and raw reply'].map((h) => el('th', {}, h)))),
      el('tbody', {}, rows.map((e) => el('tr', { 'data-kind': e.kind }, el('td', {}, e.split), el('td', {}, e.row), el('td', {}, e.metric), el('td', {}, e.judge ?? ''), el('td', {}, e.kind), el('td', {}, e.attempts),
        el('td', {}, e.message, e.raw ? el('details', {}, el('summary', {}, 'raw reply'), el('pre', {}, e.raw)) : ''))))));
    return out;
  }

  function labelsTab() {
    const out = [];
    const entries = Object.values(LABELS);
    out.push(el('p', {}, 'Open a row in the Rows tab to label it (a 1-10 label or a verdict, and a note). Labels stay in this browser until you download them; ',
      el('code', {}, `hf-judge agreement ${D.source} --labels labels.jsonl --score COLUMN`), ' reads the file back.'));
    out.push(el('label', {}, 'reviewer ', el('input', { type: 'text', id: 'reviewer', value: reviewer(), oninput: (e) => { try { localStorage.setItem('hf-judge-reviewer', e.target.value); } catch (x) { /* storage off */ } } })));
    out.push(el('div', { class: 'controls' },
      el('button', { id: 'download-labels', disabled: !entries.length, onclick: download }, `download ${entries.length} label(s) as labels.jsonl`),
      el('button', { id: 'clear-labels', disabled: !entries.length, onclick: () => { if (confirm('Remove every label of this report?')) { saveLabels({}); draw(); } } }, 'remove all')));
    out.push(table(['split', 'row', 'score', 'label', 'note', 'reviewer'], entries.map((l) => [l.split, l.row, l.score, fmt(l.label), l.note || '', l.reviewer || '']), { id: 'labels' }));
    return out;
  }
  function download() {
    const lines = Object.values(LABELS).sort((a, b) => (a.split > b.split) - (a.split < b.split) || a.row - b.row)
      .map((l) => JSON.stringify({ ...l, reviewer: l.reviewer || reviewer() || null })).join('\n') + '\n';
    const a = el('a', { href: URL.createObjectURL(new Blob([lines], { type: 'application/x-ndjson' })), download: 'labels.jsonl' });
    document.body.append(a); a.click(); a.remove();
  }

  const TABS = { overview: ['Overview', overview], rows: ['Rows', rowsTab], errors: ['Errors', errorsTab], labels: ['Labelling', labelsTab] };
  function go(tab) { S.tab = tab; draw(); }
  function draw() {
    const app = document.getElementById('app');
    const o = D.overview;
    app.replaceChildren(
      el('h1', {}, 'hf-judge report: ' + D.title),
      el('div', { class: 'small muted' }, `${judgedBy(o) ? 'judged by ' + judgedBy(o) + ' · ' : ''}made ${D.generated} by hf-judge ${D.version}`),
      el('nav', { class: 'tabs' }, Object.entries(TABS).map(([k, [name]]) => el('button', { id: 'tab-' + k, class: S.tab === k ? 'active' : null, onclick: () => go(k) }, name))),
      el('main', { id: 'view', 'data-tab': S.tab }, TABS[S.tab][1]()));
    let d = document.getElementById('detail');
    if (!d) { d = el('aside', { id: 'detail', hidden: true }); document.body.append(d); }
    if (S.tab === 'rows') { drawTable(); updateCount(); }
    document.body.setAttribute('data-ready', '1');
  }
  document.addEventListener('keydown', (e) => { if (e.key === 'Escape') { const d = document.getElementById('detail'); if (d) d.hidden = true; } });
  draw();
})();
