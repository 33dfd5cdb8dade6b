// Attention a reviewer can read. At a pause, a blue bar under each word of the case text and of the
// generated text shows how much the model looked at it to choose the next token (mean over all
// layers and heads, as a share of the attention on the case and the text: the system prompt
// and the chat template, where models park much of their attention, are left out). Clicking a
// generated word (or `w` on it) shows where that word looked when it was written, from the
// rows the worker streamed live. Experts get heatmaps by word: layers and heads at the pause,
// and the live rows. The server says which prompt tokens spell which characters of the case
// text (page data `attentionMap`, reviewer/tokenizer.py); an attention view says where its
// notes sit (inference/transformers_backend/attention.py). session.js calls in with the page's state.
(function () {
  "use strict";

  const data = JSON.parse(document.getElementById("page-data").textContent);
  const L = data.labels;
  const W = window.CaesuraWords;
  const $ = (id) => document.getElementById(id);
  const map = data.attentionMap; // {promptLength, promptTokens, caseSpans, caseText} or null
  const TEXT_SCALE = 0.95; // a bar's full height: the 95th percentile of the words' shares
  const HEATMAP_SCALE = 0.99; // a heatmap's darkest colour: the 99th percentile of its cells
  const SHOWN_FROM = 0.3; // bars weaker than this (of the full bar) are not drawn
  const TOP_WORDS = 4; // of each kind

  let state = null;
  let hooks = {};
  let focus = null; // a clicked generated word {first, last}; null: the pause position
  let shown = new Map(); // what the bars show now: "c<word>" / "g<first>" -> share

  // --- the case text as words ----------------------------------------------------------------

  const caseWords = []; // [{text, start, end}]: its non-blank segments, in UTF-16 units
  const tokenWords = new Map(); // prompt position -> [[case word, fraction of the token]]

  // Each prompt token gives its attention to the case words its characters fall in, by how
  // many of its characters each holds (a word-initial space belongs to no word).
  function prepareCase() {
    if (!map || !map.caseText) return;
    const text = map.caseText;
    const units = [0];
    for (const character of text) units.push(units[units.length - 1] + character.length);
    const wordAt = new Int32Array(text.length).fill(-1);
    for (const segment of W.segments(text)) {
      if (!segment.text.trim()) continue;
      const end = segment.start + segment.text.length;
      wordAt.fill(caseWords.push({ text: segment.text, start: segment.start, end }) - 1, segment.start, end);
    }
    map.caseSpans.forEach((span, position) => {
      if (!span) return;
      const counts = new Map();
      for (let u = units[span[0]]; u < units[span[1]]; u += 1) {
        if (wordAt[u] >= 0) counts.set(wordAt[u], (counts.get(wordAt[u]) || 0) + 1);
      }
      const total = [...counts.values()].reduce((a, b) => a + b, 0);
      if (total) tokenWords.set(position, [...counts].map(([word, n]) => [word, n / total]));
    });
  }

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
  }

  // --- the context: which position is what -----------------------------------------------------

  // Positions [0, promptLength) are the prompt (template, system prompt, case text); then the
  // generated tokens, with any notes (context the model read but did not write) among them.
  function layout(promptLength, notes, length) {
    const inNote = new Set();
    for (const [start, end] of notes || []) for (let p = start; p < end; p += 1) inNote.add(p);
    const generatedAt = [];
    for (let p = promptLength; p < length; p += 1) if (!inNote.has(p)) generatedAt.push(p);
    return { promptLength, inNote, generatedAt, length };
  }

  // Notes inferred from live rows: token g's row covers promptLength + g + 1 + (note tokens
  // before it) positions, so a longer row than expected says a note came just before it.
  function notesFromRows(rows, promptLength) {
    const notes = [];
    let before = 0;
    rows.forEach((row, g) => {
      const extra = row ? row.length - promptLength - g - 1 : before;
      if (extra > before) notes.push([promptLength + g + before, promptLength + g + extra]);
      before = Math.max(before, extra);
    });
    return notes;
  }

  // The prompt's length as the live rows tell it: the server's, unless a row is too short for
  // it (a prompt the page was not told of); then the first row's, less the tokens before it.
  function livePromptLength() {
    const g = state.liveRows.findIndex(Boolean);
    if (g < 0 || !map) return map ? map.promptLength : 0;
    const fits = state.liveRows[g].length >= map.promptLength + g + 1;
    return fits ? map.promptLength : state.liveRows[g].length - g - 1;
  }

  const caseKnown = (lay) => caseWords.length > 0 && map.caseSpans.length === lay.promptLength;

  // The words of the context in order: [{kind, text, label, parts: [[position, fraction]], ...}]
  // (label: the text as shown, a space or control token in plain words);
  // kind is template (system prompt and chat template), case, note or generated. The
  // template and the notes are left out unless `withTemplate`.
  function contextWords(lay, tokenText, withTemplate) {
    const groups = [];
    const known = caseKnown(lay);
    const byWord = new Map();
    let run = null;
    const extend = (kind, position) => {
      const text = tokenText(position);
      if (run && run.kind === kind && run.next === position && !W.startsWord(run.lastText, text)) {
        run.parts.push([position, 1]);
        run.label += text;
      } else {
        run = { kind, label: text, parts: [[position, 1]] };
        groups.push(run);
      }
      run.next = position + 1;
      run.lastText = text || run.lastText;
    };
    for (let p = 0; p < lay.promptLength; p += 1) {
      const words = known ? tokenWords.get(p) : null;
      if (words) {
        for (const [word, fraction] of words) {
          if (!byWord.has(word)) {
            const group = { kind: "case", word, label: caseWords[word].text, parts: [] };
            byWord.set(word, group);
            groups.push(group);
          }
          byWord.get(word).parts.push([p, fraction]);
        }
        run = null;
      } else if (withTemplate && !(known && map.caseSpans[p])) {
        extend("template", p);
      }
    }
    for (const p of lay.inNote) if (withTemplate) extend("note", p);
    const generated = state.tokens.slice(0, lay.generatedAt.length);
    for (const word of W.groupWords(generated)) {
      const parts = [];
      let label = "";
      for (let g = word.first; g <= word.last; g += 1) {
        parts.push([lay.generatedAt[g], 1]);
        label += (generated[g] && generated[g].text) || "";
      }
      groups.push({ kind: "generated", first: word.first, last: word.last, label, parts });
    }
    for (const group of groups) [group.text, group.label] = [group.label, labelOf(group.label)];
    return groups.sort((a, b) => a.parts[0][0] - b.parts[0][0]);
  }

  function labelOf(text) {
    const shown = W.visible(text, L) || text.trim();
    return shown.length > 22 ? `${shown.slice(0, 21)}…` : shown;
  }

  const weigh = (group, row) => group.parts.reduce((sum, [p, f]) => sum + (p < row.length ? (row[p] || 0) * f : 0), 0);

  // The value under which `q` of the positive values fall: a scale's top that one or two
  // outsized values (the position just before, a full stop) cannot set alone.
  function robustMax(values, q) {
    const sorted = values.filter((v) => v > 0).sort((a, b) => a - b);
    if (!sorted.length) return 1;
    return sorted[Math.floor(q * (sorted.length - 1))];
  }

  function meanRows(rows) {
    const width = rows.reduce((w, row) => Math.max(w, row.length), 0);
    const mean = new Array(width).fill(0);
    for (const row of rows) row.forEach((v, p) => (mean[p] += (v || 0) / rows.length));
    return mean;
  }

  // --- what the bars show -------------------------------------------------------------------

  const pauseAttention = () => {
    const pause = state.pause;
    return state.status === "paused" && pause && pause.attention && pause.attention.layers && !pause.attentionStale
      ? pause.attention
      : null;
  };

  // The row to show and how to read it: the pause position (mean over layers), or a clicked
  // word's live rows (mean over its pieces); null with a reason when there is none.
  function source() {
    if (focus) {
      const rows = [];
      for (let g = focus.first; g <= focus.last; g += 1) if (state.liveRows[g]) rows.push(state.liveRows[g]);
      if (!rows.length) return { missing: data.liveAttention ? L.attentionNoRowEdited : L.attentionNoRowEngine };
      const prompt = livePromptLength();
      const row = meanRows(rows);
      return { row, lay: layout(prompt, notesFromRows(state.liveRows, prompt), row.length) };
    }
    const attention = pauseAttention();
    if (!attention) return null;
    const layers = attention.layers;
    const row = layers[0].map((_, p) => layers.reduce((sum, layer) => sum + (layer[p] || 0), 0) / layers.length);
    return { row, lay: layout(attention.prompt_length, attention.notes, row.length), tokens: attention.tokens };
  }

  function tokenTextFor(lay, tokens) {
    return (p) => {
      if (tokens && tokens[p] !== undefined) return tokens[p];
      if (p < lay.promptLength && map && map.promptTokens[p] !== undefined) return map.promptTokens[p];
      return "";
    };
  }

  function refresh() {
    if (!state) return;
    if (state.status === "running") focus = null;
    const found = source();
    clearBars();
    renderLegend(found);
    if (found && found.missing) markFocus();
    if (!found || found.missing || !$("attention-show").checked) return;
    const groups = contextWords(found.lay, tokenTextFor(found.lay, found.tokens), false);
    const total = found.row.reduce((a, b) => a + (b || 0), 0);
    const content = groups.reduce((sum, group) => sum + weigh(group, found.row), 0);
    if (!content) return;
    // A clicked word's own pieces count in the whole but get no bar: it is the one looking.
    const own = (group) => focus && group.kind === "generated" && group.first === focus.first;
    const others = groups.filter((group) => !own(group));
    shown = new Map(others.map((group) => [key(group), weigh(group, found.row) / content]));
    const top = robustMax([...shown.values()], TEXT_SCALE);
    for (const group of others) drawBar(group, shown.get(key(group)), top);
    if (focus) markFocus();
    renderTop(others);
    $("attention-rest").textContent = fill(L.attentionRest, {
      share: W.percent(content / total),
      first: W.percent((found.row[0] || 0) / total),
    });
  }

  const key = (group) => (group.kind === "case" ? `c${group.word}` : `g${group.first}`);
  const fill = (template, values) => template.replace(/%\((\w+)\)s/g, (_, name) => String(values[name] ?? ""));

  function elementsOf(group) {
    if (group.kind === "case") return [...document.querySelectorAll(`#case-text .cw[data-word="${group.word}"]`)];
    return wordElements(group.first, group.last);
  }

  // The generated words drawn (session.js) over tokens first..last.
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
      if (group.kind === "case") element.title = fill(L.attentionShare, { share: W.percent(share) });
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

  // --- the legend: what is shown, the words looked at most, where the rest went -------------

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
    const word = Object.assign(document.createElement("q"), { textContent: focusLabel(), translate: false });
    what.replaceChildren(before, word, after || "");
  }

  const focusLabel = () =>
    labelOf(state.tokens.slice(focus.first, focus.last + 1).map((t) => (t ? t.text : "")).join(""));

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
        items.push(` ${W.percent(shown.get(key(group)))}`);
      });
      const line = Object.assign(document.createElement("span"), { className: `top-${kind}` });
      line.append(before, ...items, after || "");
      return line;
    });
    $("attention-top").replaceChildren(...lines.filter(Boolean).flatMap((line, i) => (i ? [document.createElement("br"), line] : [line])));
  }

  // --- what a reader asks -------------------------------------------------------------------

  // Where a generated word (the one holding token `position`) looked when it was written: the
  // mean of its pieces' live rows (each piece was written looking at the context before it).
  function focusWord(position) {
    const word = W.wordHolding(W.groupWords(state.tokens), position);
    if (!word || state.status === "running") return;
    const same = focus && focus.first === word.first;
    focus = same ? null : { first: word.first, last: word.last };
    refresh();
  }

  function back() {
    focus = null;
    refresh();
  }

  // A line for a word's tip: its share in what the bars show now.
  function tipLine(position) {
    const word = W.wordHolding(W.groupWords(state.tokens), position);
    const share = word ? shown.get(`g${word.first}`) : undefined;
    return share === undefined ? null : fill(L.attentionShare, { share: W.percent(share) });
  }

  // --- heatmaps for experts -----------------------------------------------------------------

  const plotConfig = { displayModeBar: false, responsive: true };
  const ROW_PX = 17;

  // The box keeps the figure's height itself: after a resize (a phone turned) Plotly's own
  // sizing would leave the box at its minimum and the figure spilling over the next card.
  function drawPlot(id, traces, figure) {
    if (!$(id) || !window.Plotly) return;
    $(id).style.minHeight = `${figure.height}px`;
    Plotly.react(id, traces, figure, plotConfig);
  }

  // Lines between the kinds of words (template, case text, notes, generated text) and their
  // names at the right, so a reader knows where the case text ends.
  function kindMarks(groups) {
    const shapes = [];
    const annotations = [];
    groups.forEach((group, row) => {
      if (row && groups[row - 1].kind === group.kind) return;
      if (row) shapes.push({ type: "line", xref: "paper", yref: "y", x0: 0, x1: 1, y0: row - 0.5, y1: row - 0.5, line: { color: "#1d2733", width: 1.5 } });
      annotations.push({
        xref: "paper", yref: "y", x: 1, y: row - 0.5, xanchor: "right", yanchor: "top", showarrow: false,
        text: L.kinds[group.kind], font: { size: 11, color: "#1d2733" }, bgcolor: "rgba(255,255,255,0.85)",
      });
    });
    return { shapes, annotations };
  }

  function wordAxis(groups) {
    return {
      tickmode: "array", tickvals: groups.map((_, i) => i), ticktext: groups.map((g) => g.label),
      autorange: "reversed", automargin: true, tickfont: { size: 11 }, showgrid: false, zeroline: false,
      title: { text: L.wordsAxis, standoff: 6 },
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
    const cell = (axis) => `${axis} %{x}<br>${L.attentionTo} %{customdata[0]}<br>%{z:.3f}<extra></extra>`;
    const traces = [
      { type: "heatmap", z: byLayer, customdata: labels.map((l) => attention.layers.map(() => l)), coloraxis: "coloraxis", hovertemplate: cell(L.layer) },
      { type: "heatmap", z: byHead, customdata: labels.map((l) => attention.heads.map(() => l)), coloraxis: "coloraxis", xaxis: "x2", hovertemplate: cell(L.head) },
    ];
    const marks = kindMarks(groups);
    const figure = {
      height: 70 + ROW_PX * groups.length, margin: { l: 10, r: 64, t: 58, b: 8 },
      xaxis: { domain: [0, 0.68], side: "top", title: { text: L.layer }, dtick: 5, showgrid: false, zeroline: false },
      xaxis2: { domain: [0.72, 1], side: "top", title: { text: L.head }, nticks: 5, showgrid: false, zeroline: false },
      yaxis: wordAxis(groups),
      coloraxis: colorAxis(robustMax(scaled, HEATMAP_SCALE)),
      shapes: marks.shapes, annotations: marks.annotations,
    };
    drawPlot("pause-heatmap", traces, figure);
    const plot = $("pause-heatmap");
    if (!plot.dataset.bound) {
      plot.dataset.bound = "1";
      plot.on("plotly_click", (click) => {
        const point = click.points[0];
        if (point && point.curveNumber === 0) hooks.showHeadsOf(point.x);
      });
    }
  }

  // One colour scale for a figure, its bar short and at the top right (the figure is tall).
  function colorAxis(top) {
    return {
      colorscale: "Blues", reversescale: true, cmin: 0, cmax: top,
      colorbar: {
        thickness: 10, lenmode: "pixels", len: 150, y: 1, yanchor: "top", x: 1.01, xpad: 6,
        title: { text: L.attentionScale, side: "top" }, tickfont: { size: 10 },
      },
    };
  }

  let liveTimer = null;

  function scheduleLive() {
    if (liveTimer === null) liveTimer = setTimeout(renderLive, 400);
  }

  // One row per generated word that has live rows, one column per earlier word; words an edit
  // wrote have none (an edit is read in one step), and the note under the plot says so.
  function renderLive() {
    liveTimer = null;
    if (!$("live-heatmap")) return;
    const rows = state.liveRows;
    const width = rows.reduce((w, row) => Math.max(w, row ? row.length : 0), 0);
    $("live-attention-card").hidden = width === 0;
    if (!width) return;
    const prompt = livePromptLength();
    const lay = layout(prompt, notesFromRows(rows, prompt), width);
    const columns = contextWords(lay, tokenTextFor(lay, null), $("live-template").checked);
    const written = W.groupWords(state.tokens);
    const withRows = written.filter((word) => rows.slice(word.first, word.last + 1).some(Boolean));
    const z = withRows.map((word) => {
      const row = meanRows(rows.slice(word.first, word.last + 1).filter(Boolean));
      return columns.map((column) => (column.parts[0][0] < row.length ? weigh(column, row) : null));
    });
    const label = (word) => labelOf(state.tokens.slice(word.first, word.last + 1).map((t) => (t ? t.text : "")).join(""));
    const rowLabels = withRows.map(label);
    const scaled = z.flatMap((values) => values.filter((v, c) => v !== null && columns[c].kind !== "template"));
    const trace = {
      type: "heatmap", z, coloraxis: "coloraxis",
      customdata: z.map(() => columns.map((column) => column.label)), text: z.map((_, r) => columns.map(() => rowLabels[r])),
      hovertemplate: `%{text}<br>${L.attentionTo} %{customdata}<br>%{z:.3f}<extra></extra>`,
    };
    const figure = {
      height: 90 + ROW_PX * withRows.length, margin: { l: 10, r: 64, t: 16, b: 40 },
      xaxis: { title: { text: L.liveColumns }, showticklabels: false, ticks: "", showgrid: false, zeroline: false },
      yaxis: { ...wordAxis(withRows.map((_, i) => ({ label: rowLabels[i] }))), title: { text: L.liveRows, standoff: 6 } },
      coloraxis: colorAxis(robustMax(scaled, HEATMAP_SCALE)),
      shapes: columnShades(columns),
    };
    drawPlot("live-heatmap", [trace], figure);
    const missing = written.length - withRows.length;
    $("live-note").hidden = !missing;
    $("live-note").textContent = missing ? fill(L.liveMissing, { count: missing }) : "";
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

  // --- wiring -------------------------------------------------------------------------------

  function init(pageState, pageHooks) {
    state = pageState;
    hooks = pageHooks;
    prepareCase();
    drawCase();
    $("attention-show").addEventListener("change", refresh);
    $("attention-back").addEventListener("click", back);
    $("attention-template").addEventListener("change", renderPauseHeatmap);
    $("attention-expert").addEventListener("toggle", renderPauseHeatmap);
    $("live-template")?.addEventListener("change", renderLive);
  }

  window.CaesuraAttention = {
    init, refresh, focusWord, back, tipLine, renderPauseHeatmap, scheduleLive,
    focused: () => focus, shares: () => Object.fromEntries(shown),
  };
})();
