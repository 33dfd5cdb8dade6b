// Heatmaps for experts (Plotly): at the pause, attention by layer (mean over heads) and one
// layer's heads, one row per word; as the model writes, one row per generated word over the
// earlier words. The pause carries one layer's heads; another layer's come from the worker
// on request (the `attention` command, answered by an `attention` event).
import { COMMAND } from "./protocol.js";
import { contextWords, layout, livePromptLength, meanRows, notesFromRows, robustMax, tokenTextFor, weigh, wordLabel } from "./attention-context.js";
import { pauseAttention } from "./attention.js";
import { binColumns, columnsFitting } from "./column-bins.js";
import { command } from "./commands.js";
import { notify } from "./notice.js";
import { $, afterPaint, fill, L } from "./page.js";
import { loadPlotly, loadPlotlyWhenIdle } from "./plotly-loader.js";
import { store } from "./store.js";
import { groupWords, wrapTitle } from "./words.js";

const HEATMAP_SCALE = 0.99; // a heatmap's darkest colour: the 99th percentile of its cells
const ROW_PX = 17;
// A phone's figure: at least this tall (a few rows would make a strip), and its axis title
// wrapped to lines of at most this many units (a CJK character counts two), in smaller type,
// so that it stays inside the figure.
const NARROW = "(max-width: 600px)";
const NARROW_MIN_PX = 300;
const narrow = () => window.matchMedia(NARROW).matches;
const NARROW_TITLE_UNITS = 34;
const TITLE_LINE_PX = 16;
const ROW_LABELS_PX = 150; // the live figure's row labels and their title, at most
const RESIZE_SETTLE_MS = 250; // a drag or a phone turned: redraw once it settles
const plotConfig = { displayModeBar: false, responsive: true };
const state = store.state;
let liveTimer = null;

// The box keeps the figure's height itself: after a resize (a phone turned) Plotly's own
// sizing would leave the box at its minimum and the figure spilling over the next card.
// Before Plotly has run (plotly-loader.js), the latest figure of each box waits for it (one
// load asked, one notice if it fails; the next figure asks again); `drawn` follows the drawing.
const waiting = new Map();

function drawPlot(id, traces, figure, drawn = () => {}) {
  if (!$(id)) return;
  if (!window.Plotly) {
    if (!waiting.size) loadPlotly().then(drawWaiting, notDrawn);
    waiting.set(id, [traces, figure, drawn]);
    return;
  }
  $(id).style.minHeight = `${figure.height}px`;
  window.Plotly.react(id, traces, figure, plotConfig);
  drawn();
}

function notDrawn() {
  waiting.clear();
  notify(L.plotsUnavailable, true);
}

function drawWaiting() {
  for (const [id, figure] of [...waiting]) {
    waiting.delete(id);
    drawPlot(id, ...figure);
  }
}

// Lines between the kinds of words (template, case text, notes, generated text) and their
// names in the margin at the right, beside the rows they name (never over a cell), so a
// reader knows where the case text ends. ``width``: the margin's pixels the names need.
const KIND_FONT_PX = 11;
const KIND_GAP_PX = 6;
function kindMarks(groups) {
  const shapes = [];
  const annotations = [];
  let width = 0;
  groups.forEach((group, row) => {
    if (row && groups[row - 1].kind === group.kind) return;
    if (row) shapes.push({ type: "line", xref: "paper", yref: "y", x0: 0, x1: 1, y0: row - 0.5, y1: row - 0.5, line: { color: "#1d2733", width: 1.5 } });
    // On a phone a name takes a line a word, so the cells keep their width.
    const lines = narrow() ? L.kinds[group.kind].split(" ") : [L.kinds[group.kind]];
    const text = lines.join("<br>");
    width = Math.max(width, ...lines.map((line) => textPx(line, KIND_FONT_PX)));
    annotations.push({
      xref: "paper", yref: "y", x: 1, xshift: KIND_GAP_PX - 2, y: row - 0.5, xanchor: "left", yanchor: "top",
      showarrow: false, text, align: "left", font: { size: KIND_FONT_PX, color: "#1d2733" },
    });
  });
  return { shapes, annotations, width: Math.ceil(width) + KIND_GAP_PX * 2 };
}

let measuring = null;
// How wide ``text`` is drawn at ``size`` px in the page's font (a canvas measures it).
function textPx(text, size) {
  measuring ??= document.createElement("canvas").getContext("2d");
  measuring.font = `${size}px ${getComputedStyle(document.body).fontFamily}`;
  return measuring.measureText(text).width;
}

function wordAxis(groups) {
  return {
    tickmode: "array", tickvals: groups.map((_, i) => i), ticktext: groups.map((g) => g.label),
    autorange: "reversed", automargin: true, tickfont: { size: 11 }, showgrid: false, zeroline: false,
    title: { text: L.wordsAxis, standoff: 6 },
  };
}

// One colour scale for a figure, its bar short and at the top right (the figure is tall);
// ``above``: lying across the figure's top edge instead, where the right margin holds names.
const BAR_ABOVE_PX = 40; // the top margin a bar lying above the axes' titles takes
function colorAxis(top, above = false) {
  const bar = above
    ? { orientation: "h", thickness: 8, lenmode: "pixels", len: 160, nticks: 4, tickangle: 0, x: 1, xanchor: "right", yref: "container", y: 1, yanchor: "top", ypad: 6, title: { text: L.attentionScale, side: "right" } }
    : { thickness: 10, lenmode: "pixels", len: 150, y: 1, yanchor: "top", x: 1.01, xpad: 6, title: { text: L.attentionScale, side: "top" } };
  return {
    colorscale: "Blues", reversescale: true, cmin: 0, cmax: top,
    colorbar: { ...bar, tickfont: { size: 10 } },
  };
}

// Layers (mean over heads) and one layer's heads, one row per word, on one colour scale.
function renderPauseHeatmap() {
  const attention = state.pause && state.pause.attention;
  if (!attention || !attention.layers || !$("attention-expert").open) return;
  $("heads-title").textContent = fill(L.headsOfLayer, { layer: attention.layer });
  $("heads-note").hidden = true;
  const lay = layout(attention.prompt_length, attention.notes, attention.layers[0].length);
  const groups = contextWords(lay, tokenTextFor(lay, attention.tokens), $("attention-template").checked);
  if (!groups.length) return;
  const byLayer = groups.map((group) => attention.layers.map((row) => weigh(group, row)));
  const byHead = groups.map((group) => attention.heads.map((row) => weigh(group, row)));
  const scaled = groups.flatMap((group, i) => (group.kind === "template" ? [] : [...byLayer[i], ...byHead[i]]));
  const labels = groups.map((group) => [group.label]);
  const cell = (axis) => `${axis} %{x}<br>${L.attentionTo} %{customdata[0]}<br>%{z:.2~%}<extra></extra>`;
  const traces = [
    { type: "heatmap", z: byLayer, customdata: labels.map((l) => attention.layers.map(() => l)), coloraxis: "coloraxis", hovertemplate: cell(L.layer) },
    { type: "heatmap", z: byHead, customdata: labels.map((l) => attention.heads.map(() => l)), coloraxis: "coloraxis", xaxis: "x2", hovertemplate: cell(L.head) },
  ];
  const marks = kindMarks(groups);
  const figure = {
    height: 70 + BAR_ABOVE_PX + ROW_PX * groups.length, margin: { l: 10, r: marks.width, t: 58 + BAR_ABOVE_PX, b: 8 },
    xaxis: { domain: [0, 0.68], side: "top", title: { text: L.layer }, dtick: 5, showgrid: false, zeroline: false },
    xaxis2: { domain: [0.72, 1], side: "top", title: { text: L.head }, nticks: 5, showgrid: false, zeroline: false },
    yaxis: wordAxis(groups),
    coloraxis: colorAxis(robustMax(scaled, HEATMAP_SCALE), true),
    shapes: marks.shapes, annotations: marks.annotations,
  };
  drawPlot("pause-heatmap", traces, figure, bindHeadsClick);
}

function bindHeadsClick() {
  const plot = $("pause-heatmap");
  if (plot.dataset.bound) return;
  plot.dataset.bound = "1";
  plot.on("plotly_click", (click) => {
    const point = click.points[0];
    if (point && point.curveNumber === 0) showHeadsOf(point.x);
  });
}

// The heads of `layer` at the pause: drawn, or asked of the worker.
export function showHeadsOf(layer) {
  const attention = state.pause && state.pause.attention;
  if (!attention || state.pause.attentionStale) return;
  if (layer === attention.layer) {
    renderPauseHeatmap();
    return;
  }
  const note = $("heads-note");
  note.hidden = false;
  note.textContent = L.loadingHeads.replace("%(layer)s", layer);
  command(COMMAND.ATTENTION, { layer }).catch((error) => {
    note.hidden = true;
    notify(fill(L.labelled, { label: L.error }) + error.message, true);
  });
}

// The live heatmap is drawn only while its box is on screen (a figure below the fold is
// drawn once it is scrolled to), at most every LIVE_EVERY_MS, and its drawing takes at most
// LIVE_SHARE of the page's time. A Plotly redraw takes 130-460 ms on a 2-core machine and
// grows with the figure; drawn every 400 ms it kept a core busy, which held up the
// reviewer's Pause click and, where the browser shares the server's cores, the model itself
// (docs/benchmarks.md). A drawing waits for the next paint, so a pause panel shown
// meanwhile is on screen first.
const LIVE_EVERY_MS = 400;
const LIVE_SHARE = 0.05;
let liveNextAt = 0; // performance.now() from which the next drawing may start
let liveInView = !("IntersectionObserver" in window); // without the observer: always drawn
let liveBehind = false; // rows came while the box was off screen

function scheduleLive() {
  if (liveTimer !== null) return;
  const wait = state.status === "running" ? Math.max(0, liveNextAt - performance.now()) : 0;
  liveTimer = setTimeout(() => afterPaint(renderLiveTimed), wait);
}

function renderLiveTimed() {
  const began = performance.now();
  renderLive();
  liveNextAt = began + Math.max(LIVE_EVERY_MS, (performance.now() - began) / LIVE_SHARE);
}

// On screen: some of the box shows beyond a strip of LIVE_EDGE_PX at the screen's top and
// bottom edges (a sliver of the figure's margin there is not worth a redraw).
const LIVE_EDGE_PX = 120;

function watchLiveBox() {
  const box = $("live-heatmap");
  if (!box || liveInView) return;
  const edge = { rootMargin: `-${LIVE_EDGE_PX}px 0px` };
  new IntersectionObserver((entries) => {
    liveInView = entries.some((entry) => entry.isIntersecting);
    if (liveInView && liveBehind) scheduleLive();
  }, edge).observe(box);
}

// The live figure's height and its column axis's title, for the screen it is drawn on.
function liveFrame(rowCount) {
  const height = 90 + ROW_PX * rowCount;
  if (!narrow()) return { height, margin: { l: 10, r: 64, t: 16, b: 40 }, title: { text: L.liveColumns } };
  const lines = wrapTitle(L.liveColumns, NARROW_TITLE_UNITS);
  return {
    height: Math.max(NARROW_MIN_PX, height + TITLE_LINE_PX * (lines.length - 1)),
    margin: { l: 10, r: 56, t: 16, b: 24 + TITLE_LINE_PX * lines.length },
    title: { text: lines.join("<br>"), font: { size: 12 } },
  };
}

// One row per generated word that has live rows, one column per earlier word (a few
// neighbours to a column where the screen is too narrow); words an edit wrote have none (an edit is read in one step), and the note under the plot says so.
function renderLive(force = false) {
  liveTimer = null;
  if (!$("live-heatmap")) return;
  const rows = state.liveRows;
  const width = rows.reduce((w, row) => Math.max(w, row ? row.length : 0), 0);
  $("live-attention-card").hidden = width === 0;
  liveBehind = Boolean(width) && !liveInView && !force;
  if (!width || liveBehind) return;
  const prompt = livePromptLength();
  const lay = layout(prompt, notesFromRows(rows, prompt), width);
  const written = groupWords(state.tokens);
  const withRows = written.filter((word) => rows.slice(word.first, word.last + 1).some(Boolean));
  const frame = liveFrame(withRows.length);
  const words = contextWords(lay, tokenTextFor(lay, null), $("live-template").checked);
  const plotPx = $("live-heatmap").clientWidth - frame.margin.l - frame.margin.r - ROW_LABELS_PX;
  const { columns, size } = binColumns(words, columnsFitting(plotPx));
  const z = withRows.map((word) => {
    const row = meanRows(rows.slice(word.first, word.last + 1).filter(Boolean));
    return columns.map((column) => (column.parts[0][0] < row.length ? weigh(column, row) : null));
  });
  const rowLabels = withRows.map(wordLabel);
  const scaled = z.flatMap((values) => values.filter((v, c) => v !== null && columns[c].kind !== "template"));
  const trace = {
    type: "heatmap", z, coloraxis: "coloraxis",
    customdata: z.map(() => columns.map((column) => column.label)), text: z.map((_, r) => columns.map(() => rowLabels[r])),
    hovertemplate: `%{text}<br>${L.attentionTo} %{customdata}<br>%{z:.2~%}<extra></extra>`,
  };
  const figure = {
    height: frame.height, margin: frame.margin,
    xaxis: { title: frame.title, showticklabels: false, ticks: "", showgrid: false, zeroline: false },
    yaxis: { ...wordAxis(withRows.map((_, i) => ({ label: rowLabels[i] }))), title: { text: L.liveRows, standoff: 6 } },
    coloraxis: colorAxis(robustMax(scaled, HEATMAP_SCALE)),
    shapes: columnShades(columns),
  };
  const shown = state.tokens.length; // what the figure shows (tests wait on it)
  drawPlot("live-heatmap", [trace], figure, () => ($("live-heatmap").dataset.tokens = shown));
  const missing = written.length - withRows.length;
  $("live-note").hidden = !missing;
  $("live-note").textContent = missing ? fill(L.liveMissing, { count: missing }) : "";
  $("live-bins-note").hidden = size === 1;
  $("live-bins-note").textContent = size > 1 ? fill(L.liveBinned, { count: words.length, size }) : "";
}

// The case text's columns on a light ground, so a reader sees where it ends.
function columnShades(columns) {
  const first = columns.findIndex((c) => c.kind === "case");
  if (first < 0) return [];
  const last = columns.length - 1 - [...columns].reverse().findIndex((c) => c.kind === "case");
  return [{
    type: "rect", xref: "x", yref: "paper", x0: first - 0.5, x1: last + 0.5, y0: 1.005, y1: 1.03,
    fillcolor: "#e0a800", line: { width: 0 },
  }];
}

export function bindAttentionPlots() {
  const pauseShown = () => afterPaint(() => state.live && pauseAttention() && renderPauseHeatmap());
  for (const topic of ["pause", "status"]) store.subscribe(topic, pauseShown);
  store.subscribe("heads", renderPauseHeatmap);
  for (const topic of ["tokens", "live"]) store.subscribe(topic, scheduleLive);
  watchLiveBox();
  if (state.status !== "running") loadPlotlyWhenIdle();
  $("attention-template").addEventListener("change", renderPauseHeatmap);
  $("attention-expert").addEventListener("toggle", renderPauseHeatmap);
  // The reviewer is looking at the box (its option), or is about to print the page.
  $("live-template")?.addEventListener("change", () => renderLive(true));
  window.addEventListener("beforeprint", () => renderLive(true));
  // How many columns fit depends on the width.
  let settle = null;
  window.addEventListener("resize", () => {
    clearTimeout(settle);
    settle = setTimeout(scheduleLive, RESIZE_SETTLE_MS);
  });
}
