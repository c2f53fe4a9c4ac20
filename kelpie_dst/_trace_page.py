"""The page of ``kelpie-dst trace html``: its HTML skeleton, CSS and JavaScript.

Kept apart from the data model in :mod:`kelpie_dst._trace_html`. ``SKELETON`` has four
placeholders, ``{{TITLE}}``, ``{{CSS}}``, ``{{DATA}}`` and ``{{JS}}``, filled in one pass.
The script reads the JSON document from ``#kelpie-trace-data`` and draws on one canvas: lanes
per node (with up, crashed, paused and stopped spans), partitions, links between lanes, event
glyphs (or per-pixel bars when more than 6,000 events are in view), the failure marker, and an
overview of the whole run; below it, a virtualised list of the events in view and the details
of the selected event. Nothing is fetched from the network.
"""

__all__ = ["CSS", "JS", "SKELETON"]

SKELETON = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="kelpie-dst trace html">
<title>{{TITLE}}</title>
<style>
{{CSS}}
</style>
</head>
<body>
<header>
  <div class="logo">kelpie<span>·</span>trace</div>
  <div class="title" id="title"></div>
  <span class="badge" id="outcome"></span>
  <div class="facts" id="facts"></div>
  <div class="hash mono" id="hash"></div>
</header>
<div class="toolbar">
  <button id="fit" title="Show the whole run (0)">Fit</button>
  <button id="zoomout" title="Zoom out (-)">&minus;</button>
  <button id="zoomin" title="Zoom in (+)">+</button>
  <span class="range mono" id="range"></span>
  <input type="search" id="search" placeholder="Filter: text in kind, node or fields  ( / )">
  <button id="kindsbtn">Kinds &#9662;</button>
  <label><input type="checkbox" id="links" checked> links</label>
  <div class="legend" id="legend"></div>
</div>
<div class="pop" id="kinds"></div>
<div id="timeline"><canvas id="canvas"></canvas></div>
<div class="bottom">
  <div class="list">
    <div class="caption" id="caption"></div>
    <div class="head"><span>#</span><span>time</span><span>node</span><span>kind</span>
      <span>fields</span></div>
    <div class="scroller" id="scroller"><div id="rows"></div></div>
  </div>
  <div class="details" id="details"></div>
</div>
<div id="tip"></div>
<script type="application/json" id="kelpie-trace-data">{{DATA}}</script>
<script>
{{JS}}
</script>
</body>
</html>
"""

CSS = r""":root {
  --bg: #f6f7f9; --panel: #ffffff; --line: #e3e6eb; --text: #17202e; --muted: #667085;
  --accent: #2563eb; --bad: #d92d20; --good: #12805c; --warn: #b54708;
  font: 13px/1.4 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
}
* { box-sizing: border-box; }
html, body { margin: 0; height: 100%; background: var(--bg); color: var(--text); }
body { display: flex; flex-direction: column; overflow: hidden; }
code, .mono { font-family: ui-monospace, "SF Mono", Menlo, Consolas, monospace; font-size: 12px; }
header { display: flex; align-items: center; gap: 14px; padding: 10px 16px;
  background: #101828; color: #f2f4f7; }
header .logo { font-weight: 700; letter-spacing: .02em; }
header .logo span { color: #7cd4fd; }
header .title { font-weight: 600; font-size: 14px; }
header .facts { color: #d0d5dd; display: flex; gap: 14px; flex-wrap: wrap; }
header .facts b { color: #fff; font-weight: 600; }
header .hash { margin-left: auto; color: #98a2b3; }
.badge { padding: 2px 9px; border-radius: 999px; font-weight: 700; font-size: 12px; }
.badge.ok { background: #d1fadf; color: #05603a; }
.badge.bad { background: #fee4e2; color: #b42318; }
.badge.none { background: #eaecf0; color: #344054; }
.toolbar { display: flex; align-items: center; gap: 8px; padding: 8px 16px;
  background: var(--panel); border-bottom: 1px solid var(--line); flex-wrap: wrap; }
button, .btn { font: inherit; border: 1px solid #d0d5dd; background: #fff; color: var(--text);
  border-radius: 6px; padding: 4px 10px; cursor: pointer; }
button:hover { background: #f2f4f7; }
.range { color: var(--muted); min-width: 250px; }
input[type=search] { font: inherit; border: 1px solid #d0d5dd; border-radius: 6px;
  padding: 4px 8px; width: 260px; }
.legend { margin-left: auto; display: flex; gap: 10px; flex-wrap: wrap; color: var(--muted); }
.legend i, .chip { display: inline-block; width: 9px; height: 9px; border-radius: 2px;
  margin-right: 4px; vertical-align: -1px; }
.pop { position: absolute; z-index: 20; background: #fff; border: 1px solid var(--line);
  border-radius: 8px; box-shadow: 0 12px 32px rgba(16,24,40,.18); padding: 10px 12px;
  max-height: 70vh; overflow: auto; display: none; min-width: 300px; }
.pop.open { display: block; }
.pop .group { margin: 6px 0 2px; font-weight: 600; color: var(--muted); text-transform: uppercase;
  font-size: 11px; letter-spacing: .04em; }
.pop label { display: flex; align-items: center; gap: 6px; padding: 1px 0; cursor: pointer; }
.pop label .n { margin-left: auto; color: var(--muted); padding-left: 16px; }
.pop .actions { display: flex; gap: 6px; margin-bottom: 6px; }
#timeline { position: relative; background: var(--panel); border-bottom: 1px solid var(--line);
  flex: 0 0 auto; }
#timeline canvas { display: block; cursor: crosshair; }
#tip { position: fixed; z-index: 30; pointer-events: none; background: #101828; color: #f2f4f7;
  border-radius: 6px; padding: 6px 9px; max-width: 460px; display: none;
  box-shadow: 0 8px 24px rgba(16,24,40,.3); }
#tip .k { font-weight: 700; }
#tip .f { color: #d0d5dd; white-space: pre-wrap; word-break: break-word; }
.bottom { flex: 1 1 auto; display: flex; min-height: 0; }
.list { flex: 1 1 60%; display: flex; flex-direction: column; min-width: 0;
  border-right: 1px solid var(--line); background: var(--panel); }
.list .head, .row { display: grid; grid-template-columns: 64px 118px 92px 150px 1fr;
  gap: 8px; padding: 0 12px; align-items: center; }
.list .head { height: 28px; color: var(--muted); font-weight: 600; border-bottom: 1px solid
  var(--line); background: #fafbfc; }
.list .caption { padding: 6px 12px; color: var(--muted); border-bottom: 1px solid var(--line); }
.scroller { flex: 1 1 auto; overflow-y: auto; position: relative; }
.row { position: absolute; left: 0; right: 0; height: 22px; white-space: nowrap; cursor: pointer;
  border-bottom: 1px solid #f2f4f7; }
.row > span { overflow: hidden; text-overflow: ellipsis; }
.row:hover { background: #f5f8ff; }
.row.sel { background: #e0eaff; }
.row .fx { color: var(--muted); }
.details { flex: 1 1 40%; overflow: auto; padding: 12px 16px; background: var(--panel); }
.details h2 { font-size: 15px; margin: 0 0 4px; display: flex; align-items: center; gap: 8px; }
.details .meta { color: var(--muted); margin-bottom: 10px; }
.details table { border-collapse: collapse; width: 100%; }
.details td { border-top: 1px solid #f2f4f7; padding: 4px 6px; vertical-align: top; }
.details td:first-child { color: var(--muted); width: 28%; white-space: nowrap; }
.details td pre { margin: 0; white-space: pre-wrap; word-break: break-word; }
.details .empty { color: var(--muted); }
.details .nav { margin-top: 12px; display: flex; gap: 6px; flex-wrap: wrap; }
.details a { color: var(--accent); cursor: pointer; text-decoration: none; }
.hint { color: var(--muted); font-size: 12px; margin-top: 14px; }
"""

JS = r""""use strict";
(function () {
const D = JSON.parse(document.getElementById("kelpie-trace-data").textContent);
const N = D.count;
const $ = (id) => document.getElementById(id);

// ---- data -----------------------------------------------------------------------------------
const T = new Float64Array(N);  // seconds
{ let acc = 0; for (let i = 0; i < N; i++) { acc += D.t[i]; T[i] = acc / 1e9; } }
const LANE = Int32Array.from(D.l), KIND = Int32Array.from(D.k), NODE = D.n, FLD = D.f;
const CATS = {
  fault: ["#d92d20", "faults"], node: ["#2563eb", "nodes"], net: ["#0e9384", "network"],
  clock: ["#7a5af8", "clock"], storage: ["#b54708", "storage"], llm: ["#dd2590", "llm"],
  sandbox: ["#ef6820", "sandbox"], mcp: ["#444ce7", "mcp"], guard: ["#c01048", "guards"],
  buggify: ["#a15c07", "buggify"], log: ["#1d2939", "log"], run: ["#667085", "run"],
  task: ["#98a2b3", "tasks"], other: ["#475467", "other"],
};
// Kinds of the user's own (repl.send, ack.recv, ...) get a colour per prefix.
const USER_COLORS = ["#0ba5ec", "#ba24d5", "#66c61c", "#ee46bc", "#6172f3", "#d4a017"];
const catOf = (kind) => {
  const head = kind.split(".")[0];
  if (CATS[head]) return head;
  if (kind.includes(".")) {
    const n = Object.keys(CATS).length - 14;
    CATS[head] = [n < USER_COLORS.length ? USER_COLORS[n] : CATS.other[0], head];
    return head;
  }
  return "other";
};
const KCAT = D.kinds.map(catOf);
const KCOLOR = KCAT.map((c) => CATS[c][0]);
// Priority when several kinds share a pixel: the most telling one wins.
const PRIO = { fault: 9, guard: 8, node: 7, run: 6, net: 5, clock: 5, storage: 4, llm: 4,
  sandbox: 4, mcp: 4, buggify: 3, log: 3, other: 2, task: 1 };
const KPRIO = KCAT.map((c) => PRIO[c] || 4);
const KCOUNT = new Int32Array(D.kinds.length);
for (let i = 0; i < N; i++) KCOUNT[KIND[i]]++;
const kindOn = D.kinds.map((k) => !k.startsWith("task.") && k !== "sched");
let showLinks = true;
let search = "", searchHit = null;  // Uint8Array when a search is active

// lanes: every node in order of appearance, the simulator ("-") last
const ROWS = [];
D.nodes.forEach((name, i) => { if (name !== "-") ROWS.push(i); });
if (D.nodes[0] === "-") ROWS.push(0);
const ROW_OF = new Int32Array(D.nodes.length);
ROWS.forEach((lane, row) => { ROW_OF[lane] = row; });
const laneName = (lane) => (D.nodes[lane] === "-" ? "simulator" : D.nodes[lane]);

const fieldText = (i) => {
  const f = D.fields[FLD[i]];
  return Object.keys(f).map((k) => k + "=" + short(f[k])).join(" ");
};
function short(v) {
  if (v && typeof v === "object" && !Array.isArray(v) && "__bytes__" in v) {
    return "b'" + v.__bytes__.slice(0, 32) + (v.__bytes__.length > 32 ? "…" : "") + "'";
  }
  const s = typeof v === "string" ? v : JSON.stringify(v);
  return s.length > 120 ? s.slice(0, 117) + "…" : s;
}
const visible = (i) => kindOn[KIND[i]] && (searchHit === null || searchHit[i] === 1);

// ---- geometry -------------------------------------------------------------------------------
const LABEL_W = 148, AXIS_H = 30, LANE_H = 46, OVER_H = 38, PAD_R = 14;
const canvas = $("canvas"), ctx = canvas.getContext("2d");
let W = 800, H = 300, plotW = 600;
const start = N ? T[0] : 0, stop = N ? T[N - 1] : 1;
const span0 = Math.max(stop - start, 1e-3);
let v0 = start - span0 * 0.02, v1 = stop + span0 * 0.02;
const xOf = (t) => LABEL_W + ((t - v0) / (v1 - v0)) * plotW;
const tOf = (x) => v0 + ((x - LABEL_W) / plotW) * (v1 - v0);
const laneTop = (lane) => AXIS_H + ROW_OF[lane] * LANE_H;
const laneMid = (lane) => laneTop(lane) + LANE_H / 2;
const lanesBottom = AXIS_H + ROWS.length * LANE_H;

function lowerBound(t) {  // first index with T[i] >= t
  let lo = 0, hi = N;
  while (lo < hi) { const m = (lo + hi) >> 1; if (T[m] < t) lo = m + 1; else hi = m; }
  return lo;
}

function resize() {
  const dpr = window.devicePixelRatio || 1;
  W = $("timeline").clientWidth;
  H = lanesBottom + 10 + OVER_H + 8;
  plotW = Math.max(W - LABEL_W - PAD_R, 50);
  canvas.width = W * dpr; canvas.height = H * dpr;
  canvas.style.width = W + "px"; canvas.style.height = H + "px";
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  overview = null;
  draw();
}

// ---- time formatting ------------------------------------------------------------------------
function niceStep(raw) {
  const p = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / p;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}
function fmtT(t, step, mag) {  // the unit follows the magnitude, the decimals the step
  const m = Math.max(mag === undefined ? Math.abs(t) : mag, step);
  const dec = (unit) => Math.min(9, Math.max(0, Math.ceil(-Math.log10(step / unit) - 1e-9)));
  if (m >= 1) return t.toFixed(dec(1)) + " s";
  if (m >= 1e-3) return (t * 1e3).toFixed(dec(1e-3)) + " ms";
  return (t * 1e6).toFixed(dec(1e-6)) + " µs";
}
const fmtExact = (t) => t.toFixed(9) + " s";

// ---- drawing --------------------------------------------------------------------------------
let hits = [];       // [x, y, index] of glyphs drawn, for hover and click
let buckets = null;  // dense mode: Map key -> {i, n, kinds}
let selected = -1, hover = -1;
let overview = null;

function draw() {
  saveHash();
  ctx.clearRect(0, 0, W, H);
  ctx.save();
  drawLanes();
  ctx.beginPath(); ctx.rect(LABEL_W, 0, plotW, lanesBottom); ctx.clip();
  drawSpans(); drawPartitions(false); drawGrid();
  if (showLinks) drawLinks();
  drawEvents(); drawPartitions(true); drawMarkers();
  ctx.restore();
  drawAxis(); drawLabels(); drawOverview();
  $("range").textContent = fmtExact(Math.max(v0, 0)) + "  \u2013  " + fmtExact(v1) +
    "   (" + fmtT(v1 - v0, (v1 - v0) / 10) + ")";
  renderList();
}

function drawLanes() {
  ROWS.forEach((lane, row) => {
    ctx.fillStyle = row % 2 ? "#fbfcfd" : "#ffffff";
    ctx.fillRect(0, AXIS_H + row * LANE_H, W, LANE_H);
    ctx.strokeStyle = "#eef0f3"; ctx.lineWidth = 1;
    ctx.beginPath(); ctx.moveTo(0, AXIS_H + (row + 1) * LANE_H + 0.5);
    ctx.lineTo(W, AXIS_H + (row + 1) * LANE_H + 0.5); ctx.stroke();
  });
}

const STATE = {
  up: [null, "#98a2b3", []], paused: ["rgba(247,144,9,0.13)", "#f79009", [2, 3]],
  down: ["rgba(217,45,32,0.10)", "#f04438", [5, 4]], stopped: [null, "#d0d5dd", [1, 4]],
};
function drawSpans() {
  for (const [lane, a, b, state] of D.spans) {
    const x0 = Math.max(xOf(a / 1e9), LABEL_W - 2), x1 = Math.min(xOf(b / 1e9), W);
    if (x1 < LABEL_W || x0 > W) continue;
    const [fill, stroke, dash] = STATE[state] || STATE.up, top = laneTop(lane);
    if (fill) {
      ctx.fillStyle = fill; ctx.fillRect(x0, top + 3, Math.max(x1 - x0, 1), LANE_H - 6);
      if (state === "down") hatch(x0, top + 3, x1 - x0, LANE_H - 6);
    }
    ctx.strokeStyle = stroke; ctx.lineWidth = state === "up" ? 1.5 : 1.2; ctx.setLineDash(dash);
    ctx.beginPath(); ctx.moveTo(x0, laneMid(lane)); ctx.lineTo(x1, laneMid(lane)); ctx.stroke();
    ctx.setLineDash([]);
    if (state !== "up" && x1 - x0 > 46) {
      ctx.fillStyle = stroke; ctx.font = "600 10px sans-serif";
      ctx.fillText(state === "down" ? "crashed" : state, Math.max(x0, LABEL_W) + 5, top + 13);
    }
  }
}
function hatch(x, y, w, h) {
  ctx.save(); ctx.beginPath(); ctx.rect(x, y, w, h); ctx.clip();
  ctx.strokeStyle = "rgba(217,45,32,0.16)"; ctx.lineWidth = 1;
  for (let k = x - h; k < x + w; k += 8) {
    ctx.beginPath(); ctx.moveTo(k, y + h); ctx.lineTo(k + h, y); ctx.stroke();
  }
  ctx.restore();
}

function drawPartitions(labels) {
  for (const [a, b, sideA, sideB, oneWay] of D.partitions) {
    const x0 = xOf(a / 1e9), x1 = xOf(b / 1e9);
    if (x1 < LABEL_W || x0 > W) continue;
    if (!labels) {
      for (const lane of sideA.concat(sideB)) {
        ctx.fillStyle = "rgba(122,90,248,0.10)";
        ctx.fillRect(x0, laneTop(lane) + 1, Math.max(x1 - x0, 1), LANE_H - 2);
        ctx.fillStyle = sideA.includes(lane) ? "#7a5af8" : "#bdb4fe";
        ctx.fillRect(x0, laneTop(lane) + LANE_H - 5, Math.max(x1 - x0, 1), 3);
      }
      continue;
    }
    const lane = sideA.length ? sideA[0] : sideB[0];
    if (x1 - x0 < 90 || lane === undefined) continue;
    const names = (s) => s.map(laneName).join(",");
    const text = "partition " + names(sideA) + (oneWay ? " ⇸ " : " ⇹ ") + names(sideB);
    ctx.font = "600 10px sans-serif";
    const lx = Math.max(x0, LABEL_W) + 6, ly = laneTop(lane) + LANE_H - 9;
    ctx.fillStyle = "rgba(255,255,255,0.92)";
    ctx.fillRect(lx - 3, ly - 10, ctx.measureText(text).width + 6, 13);
    ctx.fillStyle = "#5925dc"; ctx.fillText(text, lx, ly);
  }
}

function drawGrid() {
  const step = niceStep(((v1 - v0) * 110) / plotW);
  ctx.strokeStyle = "#f0f2f5"; ctx.lineWidth = 1;
  for (let t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
    const x = Math.round(xOf(t)) + 0.5;
    ctx.beginPath(); ctx.moveTo(x, AXIS_H); ctx.lineTo(x, lanesBottom); ctx.stroke();
  }
}

function drawAxis() {
  ctx.fillStyle = "#fafbfc"; ctx.fillRect(0, 0, W, AXIS_H);
  ctx.strokeStyle = "#e3e6eb"; ctx.beginPath(); ctx.moveTo(0, AXIS_H - 0.5);
  ctx.lineTo(W, AXIS_H - 0.5); ctx.stroke();
  const step = niceStep(((v1 - v0) * 110) / plotW);
  ctx.fillStyle = "#475467"; ctx.font = "11px sans-serif"; ctx.textAlign = "center";
  for (let t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
    const x = xOf(t);
    if (x < LABEL_W + 10 || x > W - 20) continue;
    ctx.fillRect(Math.round(x), AXIS_H - 6, 1, 6);
    const mag = Math.max(Math.abs(v0), Math.abs(v1));
    ctx.fillText(fmtT(Math.abs(t) < step / 1e6 ? 0 : t, step, mag), x, AXIS_H - 11);
  }
  ctx.textAlign = "left"; ctx.fillStyle = "#98a2b3"; ctx.font = "600 10px sans-serif";
  ctx.fillText("VIRTUAL TIME", 12, AXIS_H - 11);
}

function drawLabels() {
  ctx.fillStyle = "#fff"; ctx.fillRect(0, AXIS_H, LABEL_W, lanesBottom - AXIS_H);
  ctx.strokeStyle = "#e3e6eb";
  ctx.beginPath(); ctx.moveTo(LABEL_W - 0.5, 0); ctx.lineTo(LABEL_W - 0.5, lanesBottom);
  ctx.stroke();
  ROWS.forEach((lane, row) => {
    const top = AXIS_H + row * LANE_H, sim = D.nodes[lane] === "-";
    ctx.fillStyle = sim ? "#667085" : "#17202e";
    ctx.font = (sim ? "italic " : "600 ") + "12px sans-serif";
    ctx.fillText(laneName(lane), 14, top + 20);
    ctx.fillStyle = "#98a2b3"; ctx.font = "10px sans-serif";
    ctx.fillText(laneInfo[lane] || "", 14, top + 34);
  });
}
const laneInfo = {};
{
  const counts = new Int32Array(D.nodes.length), crashes = new Int32Array(D.nodes.length);
  for (let i = 0; i < N; i++) {
    counts[LANE[i]]++;
    if (D.kinds[KIND[i]] === "node.crash") crashes[LANE[i]]++;
  }
  D.nodes.forEach((_, lane) => {
    laneInfo[lane] = counts[lane].toLocaleString() + " events" +
      (crashes[lane] ? " · " + crashes[lane] + " crash" + (crashes[lane] > 1 ? "es" : "") : "");
  });
}

const LINK_STYLE = {
  msg: ["#155eef", [], 1.1], connect: ["#0e9384", [2, 2], 1.1], reset: ["#d92d20", [4, 3], 1.4],
  clog: ["rgba(247,144,9,0.75)", [], 3],
};
const LINK_KIND = { connect: "net.connect", reset: "net.reset", clog: "net.clog" };
const kindIndex = {};
D.kinds.forEach((k, i) => { kindIndex[k] = i; });
function linkOn(link) {
  const k = LINK_KIND[link[6]];
  if (k !== undefined) return kindIndex[k] === undefined || kindOn[kindIndex[k]];
  return visible(link[0]) || (link[1] >= 0 && visible(link[1]));
}
function drawLinks() {
  let drawn = 0;
  const inView = D.links.filter((l) => l[5] / 1e9 >= v0 && l[4] / 1e9 <= v1 && linkOn(l));
  if (inView.length > 1500) {  // a hairball tells nothing: say so, draw them when zoomed in
    ctx.font = "11px sans-serif"; ctx.fillStyle = "#98a2b3";
    ctx.fillText(inView.length.toLocaleString() + " links in view: zoom in to draw them",
      LABEL_W + 8, lanesBottom - 6);
    return 0;
  }
  const faint = inView.length > 600;
  for (const link of inView) {
    const [from, to, a, b, t0, t1, type] = link;
    const [color, dash, width] = LINK_STYLE[type] || LINK_STYLE.msg;
    const x0 = xOf(t0 / 1e9), x1 = xOf(t1 / 1e9), y0 = laneMid(a), y1 = laneMid(b);
    const lit = from === selected || to === selected || from === hover || to === hover;
    ctx.globalAlpha = lit ? 1 : faint ? 0.2 : 0.5;
    ctx.strokeStyle = color; ctx.setLineDash(dash); ctx.lineWidth = lit ? width + 1.2 : width;
    ctx.beginPath(); ctx.moveTo(x0, y0);
    if (type === "clog") { ctx.lineTo(x1, y0); ctx.stroke(); ctx.setLineDash([]); continue; }
    const bend = Math.min(Math.abs(x1 - x0) * 0.25, 30);
    ctx.bezierCurveTo(x0 + bend, y0, x1 - bend, y1, x1, y1); ctx.stroke(); ctx.setLineDash([]);
    if (!faint && a !== b) arrow(x1, y1, x1 - Math.max(bend, 1), y1 + (y0 > y1 ? 6 : -6), color);
    drawn++;
  }
  ctx.globalAlpha = 1;
  return drawn;
}
function arrow(x, y, fx, fy, color) {
  const ang = Math.atan2(y - fy, x - fx), s = 6;
  ctx.fillStyle = color; ctx.beginPath(); ctx.moveTo(x, y);
  ctx.lineTo(x - s * Math.cos(ang - 0.45), y - s * Math.sin(ang - 0.45));
  ctx.lineTo(x - s * Math.cos(ang + 0.45), y - s * Math.sin(ang + 0.45)); ctx.fill();
}

const OFFS = [0, -10, 10];
function drawEvents() {
  hits = []; buckets = null;
  const i0 = lowerBound(v0), i1 = lowerBound(v1 + 1e-12);
  let count = 0;
  for (let i = i0; i < i1 && count <= 6000; i++) if (visible(i)) count++;
  if (count > 6000) return drawDense(i0, i1);
  const slots = new Map();  // (lane, 8 px column) -> events, the most telling drawn
  for (let i = i0; i < i1; i++) {
    if (!visible(i)) continue;
    const key = LANE[i] * 1e6 + Math.floor((xOf(T[i]) - LABEL_W) / 8);
    const list = slots.get(key);
    if (list) list.push(i); else slots.set(key, [i]);
  }
  const drawn = [], badgeX = {};
  ctx.font = "600 9px sans-serif";
  for (const [key, list] of slots) {
    const lane = Math.floor(key / 1e6);
    const shown = list.length <= OFFS.length ? list :
      list.slice().sort((a, b) => KPRIO[KIND[b]] - KPRIO[KIND[a]] || a - b).slice(0, OFFS.length);
    shown.sort((a, b) => a - b).forEach((i, n) => {
      const x = xOf(T[i]), y = laneMid(lane) + OFFS[n];
      hits.push([x, y, i]); drawn.push([x, y, i]);
    });
    const bx = xOf(T[list[0]]) + 5;
    if (list.length > OFFS.length && !(bx < (badgeX[lane] || -1e9) + 18)) {
      badgeX[lane] = bx;
      ctx.fillStyle = "#98a2b3";
      ctx.fillText("+" + (list.length - OFFS.length), bx, laneTop(lane) + 9);
    }
  }
  drawn.sort((a, b) => KPRIO[KIND[a[2]]] - KPRIO[KIND[b[2]]]);
  for (const [x, y, i] of drawn) glyph(x, y, i);
}

function glyph(x, y, i) {
  const kind = D.kinds[KIND[i]], color = KCOLOR[KIND[i]];
  ctx.fillStyle = color; ctx.strokeStyle = color; ctx.lineWidth = 2;
  if (kind === "fault") {
    ctx.beginPath(); ctx.moveTo(x, y - 6); ctx.lineTo(x + 5, y); ctx.lineTo(x, y + 6);
    ctx.lineTo(x - 5, y); ctx.closePath(); ctx.fill();
    ctx.strokeStyle = "#fff"; ctx.lineWidth = 1; ctx.stroke();
  } else if (kind === "node.crash" || kind === "guard.violation") {
    ctx.strokeStyle = "#d92d20"; ctx.lineWidth = 2.5; ctx.beginPath();
    ctx.moveTo(x - 5, y - 5); ctx.lineTo(x + 5, y + 5); ctx.moveTo(x + 5, y - 5);
    ctx.lineTo(x - 5, y + 5); ctx.stroke();
  } else if (kind === "node.start" || kind === "node.restart" || kind === "node.resume") {
    ctx.fillStyle = kind === "node.resume" ? "#f79009" : "#12805c";
    ctx.beginPath(); ctx.moveTo(x - 4, y - 6); ctx.lineTo(x + 6, y); ctx.lineTo(x - 4, y + 6);
    ctx.closePath(); ctx.fill();
  } else if (kind === "node.pause") {
    ctx.fillStyle = "#f79009";
    ctx.fillRect(x - 4, y - 5, 3, 10); ctx.fillRect(x + 1, y - 5, 3, 10);
  } else if (kind === "node.stop" || kind === "run.end" || kind === "run.start") {
    ctx.fillStyle = kind === "run.end" && D.outcome !== "ok" ? "#d92d20" : "#344054";
    ctx.fillRect(x - 4, y - 4, 8, 8);
  } else if (KCAT[KIND[i]] === "task") {
    ctx.globalAlpha = 0.7; ctx.beginPath(); ctx.arc(x, y, 2.5, 0, 6.3); ctx.fill();
    ctx.globalAlpha = 1;
  } else {
    ctx.beginPath(); ctx.arc(x, y, 3.5, 0, 6.3); ctx.fill();
    ctx.strokeStyle = "#fff"; ctx.lineWidth = 1; ctx.stroke();
  }
  if (i === selected || i === hover) {
    ctx.strokeStyle = i === selected ? "#101828" : "#2563eb"; ctx.lineWidth = 2;
    ctx.beginPath(); ctx.arc(x, y, 9, 0, 6.3); ctx.stroke();
  }
}

const CAT_NAMES = Object.keys(CATS);
const KCATI = KCAT.map((c) => CAT_NAMES.indexOf(c));
function drawDense(i0, i1) {
  // Per lane and 2-pixel column: a bar as tall as log(count), in the colour of the commonest
  // category; faults and crashes as red ticks along the lane's top edge.
  const px = 2, cols = Math.ceil(plotW / px) + 1, nc = CAT_NAMES.length, nl = D.nodes.length;
  const count = new Int32Array(nl * cols), cat = new Int32Array(nl * cols * nc);
  const first = new Int32Array(nl * cols).fill(-1), bad = new Uint8Array(nl * cols);
  for (let i = i0; i < i1; i++) {
    if (!visible(i)) continue;
    const col = Math.floor((xOf(T[i]) - LABEL_W) / px);
    if (col < 0 || col >= cols) continue;
    const b = LANE[i] * cols + col, k = KIND[i];
    count[b]++; cat[b * nc + KCATI[k]]++;
    if (first[b] < 0) first[b] = i;
    if (KCAT[k] === "fault" || KCAT[k] === "guard" || D.kinds[k] === "node.crash") bad[b] = 1;
  }
  let max = 1;
  for (let b = 0; b < count.length; b++) if (count[b] > max) max = count[b];
  const scale = (LANE_H - 12) / Math.log2(1 + max), map = new Map();
  for (let b = 0; b < count.length; b++) {
    if (!count[b]) continue;
    const lane = Math.floor(b / cols), x = LABEL_W + (b % cols) * px;
    let best = 0;
    for (let c = 1; c < nc; c++) if (cat[b * nc + c] > cat[b * nc + best]) best = c;
    const h = Math.max(2, Math.log2(1 + count[b]) * scale);
    ctx.globalAlpha = 0.8; ctx.fillStyle = CATS[CAT_NAMES[best]][0];
    ctx.fillRect(x, laneMid(lane) - h / 2, px - 0.4, h);
    if (bad[b]) {
      ctx.globalAlpha = 1; ctx.fillStyle = "#d92d20"; ctx.fillRect(x, laneTop(lane) + 2, px, 3);
    }
    map.set(lane * 1e6 + (b % cols), { i: first[b], n: count[b], best: CAT_NAMES[best] });
  }
  ctx.globalAlpha = 1;
  buckets = map;
}

const VIOLATIONS = [];
for (let i = 0; i < N; i++) if (D.kinds[KIND[i]] === "guard.violation") VIOLATIONS.push(i);
function drawMarkers() {
  const end = N ? T[N - 1] : 0;
  if (D.outcome && D.outcome !== "ok") vline(end, "#d92d20", "FAILED: " + D.outcome, []);
  for (const i of VIOLATIONS) vline(T[i], "#c01048", "guard violation", [4, 3]);
  if (selected >= 0) vline(T[selected], "rgba(16,24,40,0.35)", "", [2, 3]);
}
function vline(t, color, label, dash) {
  const x = xOf(t);
  if (x < LABEL_W || x > W) return;
  ctx.strokeStyle = color; ctx.lineWidth = 1.5; ctx.setLineDash(dash);
  ctx.beginPath(); ctx.moveTo(x, AXIS_H); ctx.lineTo(x, lanesBottom); ctx.stroke();
  ctx.setLineDash([]);
  if (label) {
    ctx.font = "700 11px sans-serif";
    const w = ctx.measureText(label).width + 10;
    const bx = x + w + 4 > W ? x - w - 4 : x + 4;
    ctx.fillStyle = color; ctx.fillRect(bx, AXIS_H + 4, w, 17);
    ctx.fillStyle = "#fff"; ctx.fillText(label, bx + 5, AXIS_H + 16);
  }
}

function computeOverview() {
  const bins = new Float64Array(plotW), bad = new Uint8Array(plotW);
  for (let i = 0; i < N; i++) {
    if (!visible(i)) continue;
    const b = Math.min(plotW - 1, Math.max(0, Math.floor(((T[i] - start) / span0) * plotW)));
    bins[b]++;
    if (KPRIO[KIND[i]] >= 7 && KCAT[KIND[i]] !== "node") bad[b] = 1;
    if (D.kinds[KIND[i]] === "node.crash") bad[b] = 1;
  }
  let max = 1;
  for (const v of bins) max = Math.max(max, v);
  overview = { bins, bad, max };
}
function drawOverview() {
  if (!overview) computeOverview();
  const top = lanesBottom + 10, { bins, bad, max } = overview;
  ctx.fillStyle = "#fafbfc"; ctx.fillRect(LABEL_W, top, plotW, OVER_H);
  ctx.fillStyle = "#667085"; ctx.font = "600 10px sans-serif";
  ctx.fillText("WHOLE RUN", 14, top + 16);
  ctx.fillStyle = "#98a2b3"; ctx.font = "10px sans-serif";
  ctx.fillText(fmtT(stop - start, (stop - start) / 10 || 1) + " virtual", 14, top + 30);
  const scale = (OVER_H - 8) / Math.log2(1 + max);
  for (let b = 0; b < plotW; b++) {
    if (!bins[b]) continue;
    const h = Math.max(1, Math.log2(1 + bins[b]) * scale);
    ctx.fillStyle = "#b2bbc9"; ctx.fillRect(LABEL_W + b, top + OVER_H - h, 1, h);
    if (bad[b]) { ctx.fillStyle = "#d92d20"; ctx.fillRect(LABEL_W + b, top, 1, 4); }
  }
  const ox = (t) => LABEL_W + ((t - start) / span0) * plotW;
  const a = Math.max(LABEL_W, ox(v0)), b = Math.min(LABEL_W + plotW, ox(v1));
  ctx.fillStyle = "rgba(37,99,235,0.07)"; ctx.fillRect(a, top, Math.max(b - a, 2), OVER_H);
  ctx.strokeStyle = "rgba(37,99,235,0.7)"; ctx.lineWidth = 1;
  ctx.strokeRect(a + 0.5, top + 0.5, Math.max(b - a, 2) - 1, OVER_H - 1);
}

// ---- view changes ---------------------------------------------------------------------------
let frame = 0;
const redraw = () => { if (!frame) frame = requestAnimationFrame(() => { frame = 0; draw(); }); };
function setView(a, b) {
  const minW = 1e-9 * 50, maxW = span0 * 4;
  let w = Math.min(Math.max(b - a, minW), maxW);
  const c = (a + b) / 2;
  v0 = c - w / 2; v1 = c + w / 2;
  redraw();
}
function zoom(factor, at) {
  const t = at === undefined ? (v0 + v1) / 2 : at;
  setView(t - (t - v0) * factor, t + (v1 - t) * factor);
}
const fit = () => setView(start - span0 * 0.02, stop + span0 * 0.02);

// ---- list and details -----------------------------------------------------------------------
const ROW_H = 22;
let listIdx = new Int32Array(0), listFrom = 0, listTo = 0;
function refilter() {
  const out = [];
  for (let i = 0; i < N; i++) if (visible(i)) out.push(i);
  listIdx = Int32Array.from(out);
  overview = null;
  redraw();
}
function listBound(t) {
  let lo = 0, hi = listIdx.length;
  while (lo < hi) { const m = (lo + hi) >> 1; if (T[listIdx[m]] < t) lo = m + 1; else hi = m; }
  return lo;
}
function renderList() {
  const from = listBound(v0), to = listBound(v1 + 1e-12);
  if (from !== listFrom || to !== listTo) { listFrom = from; listTo = to; }
  const n = to - from;
  $("caption").textContent = n.toLocaleString() + " events in view · " +
    listIdx.length.toLocaleString() + " shown by the filters · " + N.toLocaleString() + " in all";
  $("rows").style.height = n * ROW_H + "px";
  const sc = $("scroller"), first = Math.floor(sc.scrollTop / ROW_H);
  const last = Math.min(n, first + Math.ceil(sc.clientHeight / ROW_H) + 2);
  const parts = [];
  for (let r = first; r < last; r++) {
    const i = listIdx[from + r], k = KIND[i];
    parts.push('<div class="row' + (i === selected ? " sel" : "") + '" data-i="' + i +
      '" style="top:' + r * ROW_H + 'px"><span class="mono">#' + i + '</span><span class="mono">' +
      T[i].toFixed(6) + '</span><span>' + esc(laneName(NODE[i])) +
      '</span><span><i class="chip" style="background:' + KCOLOR[k] + '"></i>' +
      esc(D.kinds[k]) + '</span><span class="fx mono">' + esc(fieldText(i)) + "</span></div>");
  }
  $("rows").innerHTML = parts.join("");
}
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;",
  '"': "&quot;" })[c]);

function linksOf(i) { return D.links.filter((l) => l[0] === i || l[1] === i); }
function showDetails(i) {
  const el = $("details");
  if (i < 0) {
    el.innerHTML = '<div class="empty">Click an event (or a row) to see its fields.</div>' +
      '<div class="hint">Wheel: zoom · drag: pan · double-click: zoom in · click the overview to' +
      ' jump · keys: + \u2212 0, ← →, j/k next/previous event, / search, Esc clear</div>';
    return;
  }
  const k = KIND[i], f = D.fields[FLD[i]];
  let rows = "";
  for (const key of Object.keys(f)) {
    const v = f[key];
    const text = typeof v === "string" ? v : JSON.stringify(v, null, 1);
    rows += "<tr><td>" + esc(key) + "</td><td><pre class='mono'>" + esc(text) + "</pre></td></tr>";
  }
  let rel = "";
  for (const l of linksOf(i)) {
    const other = l[0] === i ? l[1] : l[0], out = l[0] === i;
    const label = l[6] === "msg" ? (out ? "received by" : "sent by") : l[6];
    const peer = laneName(out ? l[3] : l[2]);
    const when = other >= 0 ? " <a data-go='" + other + "'>#" + other + " at " +
      fmtExact(T[other]) + "</a>" : " (" + fmtT((l[5] - l[4]) / 1e9, 1e-6) + ")";
    rel += "<tr><td>" + esc(label) + "</td><td>" + esc(peer) + when + "</td></tr>";
  }
  el.innerHTML = "<h2><i class='chip' style='background:" + KCOLOR[k] + "'></i>" +
    esc(D.kinds[k]) + "</h2><div class='meta mono'>#" + i + " · t=" + fmtExact(T[i]) +
    " · node " + esc(laneName(NODE[i])) + (LANE[i] !== NODE[i] ? " · about " +
    esc(laneName(LANE[i])) : "") + "</div><table>" + (rows || "<tr><td>no fields</td></tr>") +
    rel + "</table><div class='nav'><button data-step='-1'>◀ previous " + esc(D.kinds[k]) +
    "</button><button data-step='1'>next " + esc(D.kinds[k]) + " ▶</button></div>";
}
function select(i, center) {
  selected = i;
  showDetails(i);
  if (i >= 0 && center && (T[i] < v0 || T[i] > v1)) {
    const w = v1 - v0; setView(T[i] - w / 2, T[i] + w / 2);
  }
  if (i >= 0) {
    const r = listBound(T[i]), pos = Array.prototype.indexOf.call(listIdx.subarray(r), i);
    const from = listBound(v0);
    if (pos >= 0) {
      const top = (r + pos - from) * ROW_H, sc = $("scroller");
      if (top < sc.scrollTop || top > sc.scrollTop + sc.clientHeight - ROW_H) {
        sc.scrollTop = Math.max(0, top - Math.floor(sc.clientHeight / 3 / ROW_H) * ROW_H);
      }
    }
  }
  redraw();
}
function stepSelection(dir, sameKind) {
  if (!listIdx.length) return;
  const cur = selected;
  let p = cur < 0 ? (dir > 0 ? -1 : listIdx.length) : listBound(T[cur]);
  if (cur >= 0) while (p < listIdx.length && listIdx[p] !== cur) p++;
  for (p += dir; p >= 0 && p < listIdx.length; p += dir) {
    if (!sameKind || KIND[listIdx[p]] === KIND[cur]) { select(listIdx[p], true); return; }
  }
}

// ---- interaction ----------------------------------------------------------------------------
function nearest(x, y) {
  let best = -1, bd = 64;
  for (const [hx, hy, i] of hits) {
    const d = (hx - x) * (hx - x) + (hy - y) * (hy - y);
    if (d < bd) { bd = d; best = i; }
  }
  return best;
}
function bucketAt(x, y) {
  if (!buckets) return null;
  const row = Math.floor((y - AXIS_H) / LANE_H);
  if (row < 0 || row >= ROWS.length) return null;
  for (const dx of [0, -1, 1, -2, 2]) {
    const b = buckets.get(ROWS[row] * 1e6 + Math.floor((x - LABEL_W) / 2) + dx);
    if (b) return b;
  }
  return null;
}
const tip = $("tip");
function showTip(e, html) {
  tip.innerHTML = html; tip.style.display = "block";
  const r = tip.getBoundingClientRect();
  tip.style.left = Math.min(e.clientX + 14, window.innerWidth - r.width - 8) + "px";
  tip.style.top = (e.clientY + 16 + r.height > window.innerHeight ? e.clientY - r.height - 10 :
    e.clientY + 16) + "px";
}
const hideTip = () => { tip.style.display = "none"; };
function eventTip(i) {
  return "<div class='k'>" + esc(D.kinds[KIND[i]]) + " <span class='mono'>#" + i +
    "</span></div><div class='mono'>t=" + fmtExact(T[i]) + " · " + esc(laneName(NODE[i])) +
    "</div><div class='f mono'>" + esc(fieldText(i)) + "</div>";
}

let drag = null;
canvas.addEventListener("mousedown", (e) => {
  const y = e.offsetY;
  if (y > lanesBottom + 4) { drag = { over: true }; jumpOverview(e.offsetX); return; }
  drag = { x: e.clientX, a: v0, b: v1, moved: false };
});
window.addEventListener("mousemove", (e) => {
  if (drag && drag.over) { jumpOverview(e.clientX - canvas.getBoundingClientRect().left); return; }
  if (drag) {
    const dx = e.clientX - drag.x;
    if (Math.abs(dx) > 2) drag.moved = true;
    const dt = (dx / plotW) * (drag.a - drag.b);
    v0 = drag.a + dt; v1 = drag.b + dt; hideTip(); redraw(); return;
  }
});
window.addEventListener("mouseup", () => { setTimeout(() => { drag = null; }, 0); });
canvas.addEventListener("mousemove", (e) => {
  if (drag) return;
  const x = e.offsetX, y = e.offsetY;
  if (x < LABEL_W || y < AXIS_H || y > lanesBottom) { hideTip(); setHover(-1); return; }
  const i = nearest(x, y);
  if (i >= 0) { setHover(i); showTip(e, eventTip(i)); return; }
  setHover(-1);
  const b = bucketAt(x, y);
  if (b) {
    showTip(e, "<div class='k'>" + b.n.toLocaleString() + " events</div><div class='mono'>from t=" +
      fmtExact(T[b.i]) + "</div><div class='f'>mostly " + esc(CATS[b.best][1]) +
      " · click to zoom in</div>");
  } else hideTip();
});
canvas.addEventListener("mouseleave", () => { hideTip(); setHover(-1); });
function setHover(i) { if (i !== hover) { hover = i; redraw(); } }
canvas.addEventListener("click", (e) => {
  if (drag && (drag.moved || drag.over)) return;
  const x = e.offsetX, y = e.offsetY;
  if (x < LABEL_W || y > lanesBottom) return;
  const i = nearest(x, y);
  if (i >= 0) { select(i, false); return; }
  if (bucketAt(x, y)) zoom(1 / 8, tOf(x));
});
canvas.addEventListener("dblclick", (e) => { zoom(0.4, tOf(e.offsetX)); });
canvas.addEventListener("wheel", (e) => {
  e.preventDefault();
  if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
    const d = (e.shiftKey ? e.deltaY : e.deltaX) / plotW * (v1 - v0);
    v0 += d; v1 += d; redraw(); return;
  }
  zoom(Math.exp(e.deltaY * 0.0015), tOf(e.offsetX));
}, { passive: false });
function jumpOverview(x) {
  const t = start + ((x - LABEL_W) / plotW) * span0, w = v1 - v0;
  setView(t - w / 2, t + w / 2);
}
$("fit").onclick = fit;
$("zoomin").onclick = () => zoom(0.5);
$("zoomout").onclick = () => zoom(2);
$("links").onchange = (e) => { showLinks = e.target.checked; redraw(); };
$("scroller").addEventListener("scroll", () => renderList());
$("rows").addEventListener("click", (e) => {
  const row = e.target.closest(".row");
  if (row) select(+row.dataset.i, true);
});
$("details").addEventListener("click", (e) => {
  const go = e.target.closest("[data-go]"), st = e.target.closest("[data-step]");
  if (go) select(+go.dataset.go, true);
  if (st) stepSelection(+st.dataset.step, true);
});
let searchTimer = 0;
$("search").addEventListener("input", (e) => {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(() => {
    search = e.target.value.trim().toLowerCase();
    if (!search) { searchHit = null; refilter(); return; }
    const fieldHit = D.fields.map((f) => JSON.stringify(f).toLowerCase().includes(search));
    const kindHit = D.kinds.map((k) => k.toLowerCase().includes(search));
    const nodeHit = D.nodes.map((n, i) => laneName(i).toLowerCase().includes(search));
    searchHit = new Uint8Array(N);
    for (let i = 0; i < N; i++) {
      searchHit[i] = kindHit[KIND[i]] || fieldHit[FLD[i]] || nodeHit[NODE[i]] ? 1 : 0;
    }
    refilter();
  }, 150);
});
window.addEventListener("keydown", (e) => {
  if (e.target.tagName === "INPUT") { if (e.key === "Escape") e.target.blur(); return; }
  const w = v1 - v0;
  if (e.key === "+" || e.key === "=") zoom(0.5);
  else if (e.key === "-") zoom(2);
  else if (e.key === "0" || e.key === "f") fit();
  else if (e.key === "ArrowLeft") setView(v0 - w * 0.2, v1 - w * 0.2);
  else if (e.key === "ArrowRight") setView(v0 + w * 0.2, v1 + w * 0.2);
  else if (e.key === "j") stepSelection(1, false);
  else if (e.key === "k") stepSelection(-1, false);
  else if (e.key === "/") { e.preventDefault(); $("search").focus(); }
  else if (e.key === "Escape") { select(-1); $("kinds").classList.remove("open"); }
  else return;
  e.preventDefault();
});

// ---- kinds popover, legend, header ----------------------------------------------------------
function buildKinds() {
  const pop = $("kinds"), groups = {};
  D.kinds.forEach((k, i) => { (groups[KCAT[i]] = groups[KCAT[i]] || []).push(i); });
  let h = "<div class='actions'><button data-all='1'>all</button><button data-all='0'>none" +
    "</button><button data-all='2'>all but tasks</button></div>";
  for (const cat of Object.keys(CATS)) {
    if (!groups[cat]) continue;
    h += "<div class='group'>" + CATS[cat][1] + "</div>";
    for (const i of groups[cat].sort((a, b) => D.kinds[a] < D.kinds[b] ? -1 : 1)) {
      h += "<label><input type='checkbox' data-k='" + i + "'" + (kindOn[i] ? " checked" : "") +
        "><i class='chip' style='background:" + KCOLOR[i] + "'></i>" + esc(D.kinds[i]) +
        "<span class='n'>" + KCOUNT[i].toLocaleString() + "</span></label>";
    }
  }
  pop.innerHTML = h;
  updateKindsButton();
}
function updateKindsButton() {
  const on = kindOn.filter(Boolean).length;
  $("kindsbtn").innerHTML = "Kinds " + on + "/" + kindOn.length + " &#9662;";
}
$("kinds").addEventListener("change", (e) => {
  const k = e.target.dataset.k;
  if (k !== undefined) { kindOn[+k] = e.target.checked; updateKindsButton(); refilter(); }
});
$("kinds").addEventListener("click", (e) => {
  const all = e.target.dataset.all;
  if (all === undefined) return;
  D.kinds.forEach((k, i) => {
    kindOn[i] = all === "1" || (all === "2" && !k.startsWith("task.") && k !== "sched");
  });
  buildKinds(); refilter();
});
$("kindsbtn").onclick = (e) => {
  const pop = $("kinds"), r = e.target.getBoundingClientRect();
  pop.style.left = r.left + "px"; pop.style.top = r.bottom + 6 + "px";
  pop.classList.toggle("open");
};
document.addEventListener("mousedown", (e) => {
  if (!e.target.closest("#kinds") && !e.target.closest("#kindsbtn")) {
    $("kinds").classList.remove("open");
  }
});

function header() {
  $("title").textContent = D.title;
  const o = $("outcome");
  o.textContent = D.outcome ? (D.outcome === "ok" ? "OK" : "FAILED: " + D.outcome) : "unfinished";
  o.className = "badge " + (D.outcome === "ok" ? "ok" : D.outcome ? "bad" : "none");
  const nodes = D.nodes.filter((n) => n !== "-").length;
  let faults = 0;
  for (let i = 0; i < N; i++) if (D.kinds[KIND[i]] === "fault") faults++;
  const virt = fmtT(stop - start, (stop - start) / 10 || 1);
  const facts = [["seed", D.seed === null ? "?" : D.seed], ["events", N.toLocaleString()],
    ["nodes", nodes], ["faults", faults], ["virtual", virt]];
  $("facts").innerHTML = facts.map(([k, v]) => k + " <b>" + esc(v) + "</b>").join("");
  $("hash").textContent = D.hash ? "trace_hash " + D.hash : "";
  const used = new Set(KCAT);
  $("legend").innerHTML = Object.keys(CATS).filter((c) => used.has(c)).map((c) =>
    "<span><i style='background:" + CATS[c][0] + "'></i>" + CATS[c][1] + "</span>").join("");
}

// ---- the view in the address (#t0=..&t1=..&sel=..), to share or reopen a view --------------
let hashTimer = 0;
function saveHash() {
  clearTimeout(hashTimer);
  hashTimer = setTimeout(() => {
    const h = "#t0=" + v0.toPrecision(12) + "&t1=" + v1.toPrecision(12) +
      (selected >= 0 ? "&sel=" + selected : "");
    try { history.replaceState(null, "", h); } catch (err) { /* file:// in some browsers */ }
  }, 300);
}
function loadHash() {
  const p = new URLSearchParams(location.hash.slice(1));
  const a = parseFloat(p.get("t0")), b = parseFloat(p.get("t1")), sel = parseInt(p.get("sel"));
  if (isFinite(a) && isFinite(b) && b > a) { v0 = a; v1 = b; }
  if (sel >= 0 && sel < N) pendingSelect = sel;
}
let pendingSelect = -1;

header(); buildKinds(); showDetails(-1); loadHash();
window.addEventListener("resize", resize);
window.addEventListener("hashchange", () => {
  loadHash();
  if (pendingSelect >= 0) { select(pendingSelect, false); pendingSelect = -1; } else redraw();
});
refilter(); resize();
if (pendingSelect >= 0) { renderList(); select(pendingSelect, false); }
window.kelpieTrace = {  // for scripts and tests: the data and the view
  data: D, times: T, setView: setView, select: select, draw: draw,
  state: () => ({ v0: v0, v1: v1, selected: selected, shown: listIdx.length, search: search }),
};
})();
"""
