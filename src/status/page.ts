// The /status page: one self-contained HTML document (no external assets) that fetches
// status.json every second and draws the numbers and a QPS sparkline. Names come from
// clients, so the script only ever sets textContent; the Content-Security-Policy allows
// this page's own script and style (by hash) and requests to this origin, nothing else.

import { createHash } from 'node:crypto';

const STYLE = `
:root{--bg:#f5f6f8;--card:#fff;--ink:#17202c;--muted:#677385;--line:#e3e6eb;--accent:#2f6fed;--ok:#1f9d55;--warn:#d98e04;--bad:#d64545;--other:#8a63d2;--track:#eef0f3}
@media (prefers-color-scheme:dark){:root{--bg:#0f141a;--card:#171e27;--ink:#e6ebf1;--muted:#8b97a8;--line:#27313d;--accent:#5b8ff9;--track:#222b36}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
header{display:flex;align-items:baseline;gap:16px;flex-wrap:wrap;padding:18px 24px 6px}
h1{font-size:20px;margin:0;font-weight:650;letter-spacing:-.01em}
h1 span{color:var(--muted);font-weight:500}
h2{font-size:13px;margin:0 0 10px;font-weight:600;text-transform:uppercase;letter-spacing:.04em;color:var(--muted)}
h2 span{text-transform:none;letter-spacing:0;font-weight:500}
.muted{color:var(--muted)}
#meta{flex:1}
.pill{display:inline-block;padding:2px 10px;border-radius:999px;font-size:12px;font-weight:600;background:var(--track);color:var(--muted);white-space:nowrap}
.pill.ok{background:rgba(31,157,85,.14);color:var(--ok)}
.pill.warn{background:rgba(217,142,4,.16);color:var(--warn)}
.pill.bad{background:rgba(214,69,69,.14);color:var(--bad)}
main{padding:8px 24px 24px;display:grid;gap:16px}
.tiles{display:grid;grid-template-columns:1.6fr 1fr 1.3fr 1fr;gap:16px}
.tile,.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:14px 16px;min-width:0}
.label{color:var(--muted);font-size:12px;font-weight:600;text-transform:uppercase;letter-spacing:.04em}
.big{font-size:34px;font-weight:650;letter-spacing:-.02em;font-variant-numeric:tabular-nums;margin-top:2px}
.sub{color:var(--muted);font-size:12px;margin-top:2px;font-variant-numeric:tabular-nums}
#spark{display:block;width:100%;height:40px;margin:6px 0 2px}
#spark polyline{fill:none;stroke:var(--accent);stroke-width:1.6;vector-effect:non-scaling-stroke}
#spark polygon{fill:var(--accent);opacity:.14}
.trio{display:flex;gap:18px;margin-top:8px}
.trio span{display:flex;flex-direction:column;min-width:0}
.trio b{font-size:24px;font-weight:650;font-variant-numeric:tabular-nums;white-space:nowrap;letter-spacing:-.01em}
.trio b small,.big small{font-size:13px;font-weight:500;color:var(--muted);margin-left:3px;letter-spacing:0}
.trio i{font-style:normal;color:var(--muted);font-size:12px}
.bar{display:flex;height:14px;border-radius:7px;overflow:hidden;background:var(--track)}
.bar div{height:100%;min-width:2px}
.legend{list-style:none;margin:10px 0 0;padding:0;display:flex;flex-wrap:wrap;gap:6px 18px;font-variant-numeric:tabular-nums}
.legend li::before{content:"";display:inline-block;width:10px;height:10px;border-radius:3px;margin-right:6px;background:var(--c,var(--muted));vertical-align:-1px}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:16px}
table{width:100%;border-collapse:collapse;table-layout:fixed;font-variant-numeric:tabular-nums}
th{font-size:11px;text-transform:uppercase;letter-spacing:.04em;color:var(--muted);font-weight:600;text-align:left;padding:0 8px 6px 0}
td{padding:5px 8px 5px 0;border-top:1px solid var(--line);overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
th.n,td.n{text-align:right}
td.name{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
td.empty{color:var(--muted);text-align:center;padding:14px 0}
.share{display:flex;align-items:center;gap:8px}
.share div{flex:1;height:6px;border-radius:3px;background:var(--track);overflow:hidden}
.share div div{height:100%;background:var(--accent)}
.share span{width:46px;text-align:right}
#top-nx .share div div{background:var(--warn)}
.source{margin-top:8px;font-size:12px;overflow-wrap:anywhere}
footer{padding:0 24px 20px;font-size:12px}
footer a{color:inherit}
@media (max-width:900px){.tiles{grid-template-columns:1fr 1fr}.cols{grid-template-columns:1fr}}
`;

const SCRIPT = `
(function () {
  'use strict';
  var HISTORY = 60;
  var history = [];
  var RCODE_COLORS = { NOERROR: 'var(--ok)', NXDOMAIN: 'var(--warn)', SERVFAIL: 'var(--bad)', REFUSED: 'var(--other)' };
  function byId(id) { return document.getElementById(id); }
  function setText(id, text) { byId(id).textContent = text; }
  function int(n) { return Math.round(n).toLocaleString('en-US'); }
  function rate(n) { return n >= 100 ? int(n) : n.toFixed(1); }
  function msNumber(s) {
    var v = s * 1000;
    return v < 1 ? v.toFixed(2) : v < 10 ? v.toFixed(1) : int(v);
  }
  function ms(s) {
    return s === null || s === undefined ? '\\u2013' : msNumber(s) + ' ms';
  }
  /** A latency as a big number with a small unit. */
  function setMs(id, s) {
    var b = byId(id);
    if (s === null || s === undefined) { b.textContent = '\\u2013'; return; }
    b.textContent = msNumber(s);
    b.appendChild(el('small', '', ' ms'));
  }
  function pct(x) {
    if (x === null || x === undefined) return '\\u2013';
    var p = x * 100;
    return (p === 0 || p === 100 ? p.toFixed(0) : p < 10 ? p.toFixed(2) : p.toFixed(1)) + '%';
  }
  function ago(seconds) {
    seconds = Math.max(0, Math.round(seconds));
    if (seconds < 60) return seconds + 's';
    var m = Math.floor(seconds / 60);
    if (m < 60) return m + 'm ' + (seconds % 60) + 's';
    var h = Math.floor(m / 60);
    if (h < 48) return h + 'h ' + (m % 60) + 'm';
    return Math.floor(h / 24) + 'd ' + (h % 24) + 'h';
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = String(text);
    return e;
  }
  function pill(state) {
    var kind = state === 'up' ? 'ok' : state === 'failing' || state === 'stale' || state === 'syncing' ? 'warn' : 'bad';
    return el('span', 'pill ' + kind, state);
  }
  /** columns: [title, className, width]; cells: text, or a Node. */
  function table(id, columns, rows, empty) {
    var t = byId(id);
    t.textContent = '';
    var head = el('tr');
    columns.forEach(function (c) {
      var th = head.appendChild(el('th', c[1], c[0]));
      if (c[2]) th.style.width = c[2];
    });
    t.appendChild(el('thead')).appendChild(head);
    var body = t.appendChild(el('tbody'));
    if (rows.length === 0) {
      var td = el('td', 'empty', empty);
      td.colSpan = columns.length;
      body.appendChild(el('tr')).appendChild(td);
      return;
    }
    rows.forEach(function (cells) {
      var tr = body.appendChild(el('tr'));
      cells.forEach(function (cell, i) {
        var td = el('td', columns[i][1]);
        if (cell instanceof Node) td.appendChild(cell); else td.textContent = String(cell);
        if (columns[i][1] === 'name') td.title = String(cell);
        tr.appendChild(td);
      });
    });
  }
  function share(x) {
    var box = el('div', 'share');
    var track = box.appendChild(el('div'));
    track.appendChild(el('div')).style.width = Math.max(1, Math.round(x * 100)) + '%';
    box.appendChild(el('span', '', pct(x)));
    return box;
  }
  function names(id, list, empty) {
    table(id, [['Name', 'name', '56%'], ['Share', '', '29%'], ['Count', 'n', '15%']], list.map(function (e) {
      return [e.name, share(e.share), int(e.count)];
    }), empty);
  }
  function spark(values) {
    var svg = byId('spark');
    var NS = 'http://www.w3.org/2000/svg';
    svg.textContent = '';
    if (values.length < 2) return;
    var max = Math.max.apply(null, values) || 1;
    // The first seconds spread over the width; after that one point per second of the last minute.
    var slots = Math.min(HISTORY, Math.max(values.length, 15));
    var w = 120, h = 32, step = w / (slots - 1), x0 = w - step * (values.length - 1);
    var pts = values.map(function (v, i) { return (x0 + i * step).toFixed(2) + ',' + (h - 1 - (v / max) * (h - 4)).toFixed(2); });
    var area = document.createElementNS(NS, 'polygon');
    area.setAttribute('points', x0.toFixed(2) + ',' + h + ' ' + pts.join(' ') + ' ' + w + ',' + h);
    svg.appendChild(area);
    var line = document.createElementNS(NS, 'polyline');
    line.setAttribute('points', pts.join(' '));
    svg.appendChild(line);
  }
  function render(r) {
    var win = 'last ' + r.windowSeconds + ' s';
    setText('meta', 'v' + r.version + ' \\u00b7 ' + r.workers + (r.workers === 1 ? ' worker' : ' workers') + ' \\u00b7 up ' + ago(r.uptimeSeconds));
    var live = byId('live');
    live.className = 'pill ok';
    live.textContent = 'live \\u00b7 ' + new Date(r.time).toLocaleTimeString();
    history.push(r.queries.perSecond);
    if (history.length > HISTORY) history.shift();
    setText('qps', rate(r.queries.perSecond));
    setText('qps-peak', 'peak ' + rate(Math.max.apply(null, history)) + '/s over the last ' + history.length + ' s');
    spark(history);
    setText('total', int(r.queries.total));
    setText('recent-count', int(r.queries.recent) + ' in the ' + win);
    setMs('p50', r.latency.recent.p50);
    setMs('p90', r.latency.recent.p90);
    setMs('p99', r.latency.recent.p99);
    setText('latency-window', win);
    setText('latency-total', 'since start: p50 ' + ms(r.latency.total.p50) + ' \\u00b7 p99 ' + ms(r.latency.total.p99));
    setText('hit-ratio', pct(r.cache.recent.hitRatio));
    setText('hit-total', r.cache.total.requests === 0 ? 'no cache lookups yet' : 'since start: ' + pct(r.cache.total.hitRatio) + ' of ' + int(r.cache.total.requests));
    setText('rcode-window', win);
    var mix = r.queries.recent > 0 ? r.rcodes.recent : r.rcodes.total;
    var all = Object.keys(mix).reduce(function (a, k) { return a + mix[k]; }, 0);
    var bar = byId('rcode-bar');
    var legend = byId('rcode-legend');
    bar.textContent = '';
    legend.textContent = '';
    Object.keys(mix).forEach(function (k) {
      var color = RCODE_COLORS[k] || 'var(--muted)';
      var seg = bar.appendChild(el('div'));
      seg.style.width = (mix[k] / all) * 100 + '%';
      seg.style.background = color;
      seg.title = k;
      var li = legend.appendChild(el('li', '', k + ' ' + pct(mix[k] / all) + ' (' + int(mix[k]) + ')'));
      li.style.setProperty('--c', color);
    });
    if (all === 0) legend.appendChild(el('li', 'muted', 'no queries yet'));
    names('top-names', r.topNames, 'no queries yet');
    names('top-nx', r.topNxdomain, 'no NXDOMAIN answers');
    table('upstreams', [['Upstream', 'name', '27%'], ['State', '', '14%'], ['Tries', 'n', '12%'], ['No reply', 'n', '12%'], ['SERVFAIL', 'n', '12%'], ['Failed checks', 'n', '11%'], ['Mean', 'n', '12%']],
      r.upstreams.map(function (u) {
        return [u.to, pill(u.state), int(u.requests), int(u.noReply), int(u.rcodes.SERVFAIL || 0), int(u.healthcheckFailures), ms(u.meanLatency)];
      }), 'no forward upstreams');
    table('kube', [['Zones', 'name', '27%'], ['State', '', '15%'], ['Services', 'n', '13%'], ['Slices', 'n', '11%'], ['Namespaces', 'n', '15%'], ['Last change', 'n', '19%']],
      r.kubernetes.map(function (k) {
        var when = k.lastChange ? ago((Date.parse(r.time) - Date.parse(k.lastChange)) / 1000) + ' ago' : '\\u2013';
        return [k.zones.join(' '), pill(k.state), int(k.services), int(k.endpointSlices), int(k.namespaces), when];
      }), 'no kubernetes plugin');
    setText('kube-source', r.kubernetes.length ? 'Source: ' + r.kubernetes.map(function (k) { return k.source; }).join(', ') : '');
  }
  function failed(why) {
    var live = byId('live');
    live.className = 'pill bad';
    live.textContent = 'no answer \\u00b7 ' + why;
  }
  function poll() {
    fetch('status.json', { cache: 'no-store' })
      .then(function (res) {
        if (!res.ok) throw new Error('HTTP ' + res.status);
        return res.json();
      })
      .then(render, function (e) { failed(e.message || String(e)); })
      .then(function () { setTimeout(poll, 1000); });
  }
  poll();
})();
`;

const BODY = `
<header>
  <h1>clusterdns <span>status</span></h1>
  <div id="meta" class="muted"></div>
  <div id="live" class="pill">connecting\u2026</div>
</header>
<main>
  <section class="tiles">
    <div class="tile">
      <div class="label">Queries per second</div>
      <div class="big" id="qps">\u2013</div>
      <svg id="spark" viewBox="0 0 120 32" preserveAspectRatio="none" aria-label="queries per second, last minute"></svg>
      <div class="sub" id="qps-peak"></div>
    </div>
    <div class="tile">
      <div class="label">Queries answered</div>
      <div class="big" id="total">\u2013</div>
      <div class="sub" id="recent-count"></div>
    </div>
    <div class="tile">
      <div class="label">Latency <span id="latency-window"></span></div>
      <div class="trio">
        <span><b id="p50">\u2013</b><i>p50</i></span>
        <span><b id="p90">\u2013</b><i>p90</i></span>
        <span><b id="p99">\u2013</b><i>p99</i></span>
      </div>
      <div class="sub" id="latency-total"></div>
    </div>
    <div class="tile">
      <div class="label">Cache hit ratio</div>
      <div class="big" id="hit-ratio">\u2013</div>
      <div class="sub" id="hit-total"></div>
    </div>
  </section>
  <section class="card">
    <h2>Response codes <span id="rcode-window"></span></h2>
    <div id="rcode-bar" class="bar"></div>
    <ul id="rcode-legend" class="legend"></ul>
  </section>
  <div class="cols">
    <section class="card"><h2>Top names</h2><table id="top-names"></table></section>
    <section class="card"><h2>Top NXDOMAIN names</h2><table id="top-nx"></table></section>
  </div>
  <div class="cols">
    <section class="card"><h2>Upstreams <span>forward</span></h2><table id="upstreams"></table></section>
    <section class="card"><h2>Kubernetes API</h2><table id="kube"></table><div class="source muted" id="kube-source"></div></section>
  </div>
</main>
<footer class="muted">Every second from <a href="status.json">status.json</a>: whole-process numbers, summed over the workers. Top names decay with a one-minute half-life.</footer>
`;

function sha256(text: string): string {
  return `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;
}

export const STATUS_PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>clusterdns status</title>
<link rel="icon" href="data:,">
<style>${STYLE}</style>
</head>
<body>${BODY}<script>${SCRIPT}</script>
</body>
</html>
`;

/** Only this page's own script and style, and fetches to this origin. */
export const STATUS_PAGE_CSP = [
  "default-src 'none'",
  `script-src ${sha256(SCRIPT)}`,
  `style-src ${sha256(STYLE)}`,
  "connect-src 'self'",
  'img-src data:',
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');
