// Attention a reviewer can read. At a pause, a blue bar under each word of the case text and
// of the generated text shows how much the model looked at it to choose the next token (mean
// over all layers and heads, as a share of the attention on the case and the text: the
// system prompt and the chat template, where models park much of their attention, are left
// out). Clicking a generated word (or `w` on it) shows where that word looked when it was
// written, from the rows the worker streamed live. The heatmaps are attention-plots.js's.
import { caseKnown, caseWords, contextWords, layout, livePromptLength, map, meanRows, notesFromRows, robustMax, tokenTextFor, weigh, wordLabel } from "./attention-context.js";
import { gateOf } from "./attention-gate.js";
import { clearGate, drawGate, markAnchors, showGate } from "./gate-view.js";
import { $, afterPaint, fill, hasFeature, L } from "./page.js";
import { store } from "./store.js";
import { groupWords, percent, wordHolding } from "./words.js";

const TEXT_SCALE = 0.95; // a bar's full height: the 95th percentile of the words' shares
const SHOWN_FROM = 0.3; // bars weaker than this (of the full bar) are not drawn
const TOP_WORDS = 4; // of each kind
const state = store.state;
let focus = null; // a clicked generated word {first, last}; null: the pause position
let shown = new Map(); // what the bars show now: "c<word>" / "g<first>" -> share

// The pause's attention, while the pause is open and its attention current.
export function pauseAttention() {
  const pause = state.pause;
  return state.status === "paused" && pause && pause.attention && pause.attention.layers && !pause.attentionStale
    ? pause.attention
    : null;
}

// The row to show and how to read it: the pause position (mean over layers), or a clicked
// word's live rows (mean over its pieces); null with a reason when there is none.
function source() {
  if (focus) {
    const rows = [];
    for (let g = focus.first; g <= focus.last; g += 1) if (state.liveRows[g]) rows.push(state.liveRows[g]);
    if (!rows.length) return { missing: hasFeature("live_attention") ? L.attentionNoRowEdited : L.attentionNoRowEngine };
    const prompt = livePromptLength();
    const row = meanRows(rows);
    return { row, lay: layout(prompt, notesFromRows(state.liveRows, prompt), row.length) };
  }
  const attention = pauseAttention();
  if (!attention) return null;
  const layers = attention.layers;
  const row = layers[0].map((_, p) => layers.reduce((sum, layer) => sum + (layer[p] || 0), 0) / layers.length);
  const lay = layout(attention.prompt_length, attention.notes, row.length);
  return { row, lay, tokens: attention.tokens, gate: gateOf(attention) };
}

export function refresh() {
  if (state.status === "running") focus = null;
  focus = wordAt(focus);
  const found = source();
  clearGate();
  clearBars();
  renderLegend(found);
  // The gate is the pause's: a clicked word's live rows were read with the gate of their step.
  const gate = found && !focus ? found.gate : null;
  showGate(gate);
  if (found && found.missing) markFocus();
  if (!found || found.missing || !$("attention-show").checked) return;
  const groups = contextWords(found.lay, tokenTextFor(found.lay, found.tokens), false);
  const total = found.row.reduce((a, b) => a + (b || 0), 0);
  const content = groups.reduce((sum, group) => sum + weigh(group, found.row), 0);
  if (!content) return gate && drawGate(gate, groups, elementsOf);
  // A clicked word's own pieces count in the whole but get no bar: it is the one looking.
  const own = (group) => focus && group.kind === "generated" && group.first === focus.first;
  const others = groups.filter((group) => !own(group));
  shown = new Map(others.map((group) => [key(group), weigh(group, found.row) / content]));
  const top = robustMax([...shown.values()], TEXT_SCALE);
  for (const group of others) drawBar(group, shown.get(key(group)), top);
  if (focus) markFocus();
  renderTop(others);
  if (gate) drawGate(gate, groups, elementsOf);
  $("attention-rest").textContent = fill(L.attentionRest, {
    share: percent(content / total),
    first: percent((found.row[0] || 0) / total),
  });
}

// The clicked word as the text now reads: an edit or a rollback since the click regroups the
// pieces (a replacement's first piece alone would read "hy", or "part of a character"), so
// the focus is the whole word now holding its first piece, or none once that is gone.
function wordAt(clicked) {
  if (!clicked) return null;
  const word = wordHolding(groupWords(state.tokens), clicked.first);
  return word ? { first: word.first, last: word.last } : null;
}

const key = (group) => (group.kind === "case" ? `c${group.word}` : `g${group.first}`);

function elementsOf(group) {
  if (group.kind === "case") return [...document.querySelectorAll(`#case-text .cw[data-word="${group.word}"]`)];
  return wordElements(group.first, group.last);
}

// The generated words drawn (stream.js) over tokens first..last.
function wordElements(first, last) {
  const drawn = $("tokens").querySelector(`.word[data-first="${first}"]`);
  if (drawn && +drawn.dataset.last === last) return [drawn];
  return [...$("tokens").querySelectorAll(".word")].filter((e) => +e.dataset.first <= last && +e.dataset.last >= first);
}

// Attention is heavy-tailed: the bar's strength is the square root of the share against the
// scale's top, so the words a little behind the top few still show.
function drawBar(group, share, top) {
  const height = Math.sqrt(Math.min(1, share / top));
  if (height < SHOWN_FROM) return;
  for (const element of elementsOf(group)) {
    element.classList.add("att");
    element.style.setProperty("--att", height.toFixed(3));
    element.dataset.attention = share.toFixed(4);
    if (group.kind === "case") element.title = fill(L.attentionShare, { share: percent(share) });
  }
}

function clearBars() {
  shown = new Map();
  for (const element of document.querySelectorAll(".att, .att-focus")) {
    element.classList.remove("att", "att-focus");
    element.style.removeProperty("--att");
    delete element.dataset.attention;
    if (element.classList.contains("cw")) element.removeAttribute("title");
  }
}

function markFocus() {
  for (const element of wordElements(focus.first, focus.last)) element.classList.add("att-focus");
}

// The legend: what is shown, the words looked at most, where the rest went.
function renderLegend(found) {
  const legend = $("attention-legend");
  legend.hidden = !found;
  if (!found) return;
  $("attention-back").hidden = !focus;
  $("attention-back").textContent = pauseAttention() ? L.attentionBack : L.attentionHide;
  $("attention-top").textContent = "";
  $("attention-rest").textContent = "";
  const what = $("attention-what");
  if (!focus) {
    what.textContent = caseKnown(found.lay) ? L.attentionAtPause : L.attentionAtPauseNoCase;
    return;
  }
  const [before, after] = (found.missing || L.attentionOfWord).split("%(word)s");
  const word = Object.assign(document.createElement("q"), { textContent: wordLabel(focus), translate: false });
  what.replaceChildren(before, word, after || "");
}

// The words looked at most, in the case text and in the generated text: the bars in words.
function renderTop(groups) {
  const lines = ["case", "generated"].map((kind) => {
    const best = groups
      .filter((group) => group.kind === kind && shown.get(key(group)) > 0 && /[\p{L}\p{N}]/u.test(group.text))
      .sort((a, b) => shown.get(key(b)) - shown.get(key(a)))
      .slice(0, TOP_WORDS);
    if (!best.length) return null;
    const [before, after] = L.attentionTop[kind].split("%(words)s");
    const items = [];
    best.forEach((group, i) => {
      if (i) items.push(" · ");
      items.push(Object.assign(document.createElement("q"), { textContent: group.label, translate: false }));
      items.push(` ${percent(shown.get(key(group)))}`);
    });
    const line = Object.assign(document.createElement("span"), { className: `top-${kind}` });
    line.append(before, ...items, after || "");
    return line;
  });
  $("attention-top").replaceChildren(...lines.filter(Boolean).flatMap((line, i) => (i ? [document.createElement("br"), line] : [line])));
}

// Where a generated word (the one holding token `position`) looked when it was written: the
// mean of its pieces' live rows (each piece was written looking at the context before it).
export function focusWord(position) {
  const word = wordHolding(groupWords(state.tokens), position);
  if (!word || state.status === "running") return;
  const same = focus && focus.first === word.first;
  focus = same ? null : { first: word.first, last: word.last };
  refresh();
}

export function back() {
  focus = null;
  refresh();
}

// A line for a word's tip: its share in what the bars show now.
export function tipLine(position) {
  const word = wordHolding(groupWords(state.tokens), position);
  const share = word ? shown.get(`g${word.first}`) : undefined;
  return share === undefined ? null : fill(L.attentionShare, { share: percent(share) });
}

// For scripted checks: the word looked from, and the shares the bars show.
export const focused = () => focus;
export const shares = () => Object.fromEntries(shown);

// The case text drawn as words the bars can sit under (the same characters as rendered).
function drawCase() {
  const box = $("case-text");
  if (!box || !caseWords.length) return;
  const text = map.caseText;
  const parts = [];
  let at = 0;
  caseWords.forEach((word, index) => {
    if (word.start > at) parts.push(text.slice(at, word.start).replace(/\r/g, ""));
    const span = Object.assign(document.createElement("span"), { className: "cw", textContent: word.text });
    span.dataset.word = index;
    parts.push(span);
    at = word.end;
  });
  if (at < text.length) parts.push(text.slice(at).replace(/\r/g, ""));
  box.replaceChildren(...parts);
  markAnchors(text, caseWords, map.caseAnchors, (index) => box.querySelector(`.cw[data-word="${index}"]`));
}

export function bindAttention() {
  drawCase();
  store.subscribe("drawn", refresh);
  for (const topic of ["pause", "status"]) store.subscribe(topic, () => afterPaint(refresh));
  $("attention-show").addEventListener("change", refresh);
  $("attention-back").addEventListener("click", back);
}
