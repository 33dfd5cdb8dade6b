// The context attention is read over, as words. Positions [0, promptLength) are the prompt
// (template, system prompt, case text); then the generated tokens, with any notes (context
// the model read but did not write) among them. The server says which prompt tokens spell
// which characters of the case text (page data `attentionMap`, reviewer/web/tokenizer.py); an
// attention view says where its notes sit (inference/transformers_backend/attention.py).
import { data, L } from "./page.js";
import { store } from "./store.js";
import { groupWords, segments, startsWord, visible } from "./words.js";

export const map = data.attentionMap; // {promptLength, promptTokens, caseSpans, caseText} or null
export const caseWords = []; // [{text, start, end}]: its non-blank segments, in UTF-16 units
const tokenWords = new Map(); // prompt position -> [[case word, fraction of the token]]
const state = store.state;

// Each prompt token gives its attention to the case words its characters fall in, by how
// many of its characters each holds (a word-initial space belongs to no word).
function prepareCase() {
  if (!map || !map.caseText) return;
  const text = map.caseText;
  const units = [0];
  for (const character of text) units.push(units[units.length - 1] + character.length);
  const wordAt = new Int32Array(text.length).fill(-1);
  for (const segment of segments(text)) {
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

prepareCase();

export function layout(promptLength, notes, length) {
  const inNote = new Set();
  for (const [start, end] of notes || []) for (let p = start; p < end; p += 1) inNote.add(p);
  const generatedAt = [];
  for (let p = promptLength; p < length; p += 1) if (!inNote.has(p)) generatedAt.push(p);
  return { promptLength, inNote, generatedAt, length };
}

// Notes inferred from live rows: token g's row covers promptLength + g + 1 + (note tokens
// before it) positions, so a longer row than expected says a note came just before it.
export function notesFromRows(rows, promptLength) {
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
export function livePromptLength() {
  const g = state.liveRows.findIndex(Boolean);
  if (g < 0 || !map) return map ? map.promptLength : 0;
  const fits = state.liveRows[g].length >= map.promptLength + g + 1;
  return fits ? map.promptLength : state.liveRows[g].length - g - 1;
}

export const caseKnown = (lay) => caseWords.length > 0 && map.caseSpans.length === lay.promptLength;

// The words of the context in order: [{kind, text, label, parts: [[position, fraction]], ...}]
// (label: the text as shown, a space or control token in plain words);
// kind is template (system prompt and chat template), case, note or generated. The
// template and the notes are left out unless `withTemplate`.
export function contextWords(lay, tokenText, withTemplate) {
  const groups = [];
  const known = caseKnown(lay);
  const byWord = new Map();
  let run = null;
  const extend = (kind, position) => {
    const text = tokenText(position);
    if (run && run.kind === kind && run.next === position && !startsWord(run.lastText, text)) {
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
  for (const word of groupWords(generated)) {
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

export function labelOf(text) {
  const shown = visible(text, L) || text.trim();
  return shown.length > 22 ? `${shown.slice(0, 21)}…` : shown;
}

export function tokenTextFor(lay, tokens) {
  return (p) => {
    if (tokens && tokens[p] !== undefined) return tokens[p];
    if (p < lay.promptLength && map && map.promptTokens[p] !== undefined) return map.promptTokens[p];
    return "";
  };
}

export const weigh = (group, row) => group.parts.reduce((sum, [p, f]) => sum + (p < row.length ? (row[p] || 0) * f : 0), 0);

// The value under which `q` of the positive values fall: a scale's top that one or two
// outsized values (the position just before, a full stop) cannot set alone.
export function robustMax(values, q) {
  const sorted = values.filter((v) => v > 0).sort((a, b) => a - b);
  if (!sorted.length) return 1;
  return sorted[Math.floor(q * (sorted.length - 1))];
}

export function meanRows(rows) {
  const width = rows.reduce((w, row) => Math.max(w, row.length), 0);
  const mean = new Array(width).fill(0);
  for (const row of rows) row.forEach((v, p) => (mean[p] += (v || 0) / rows.length));
  return mean;
}

export const wordLabel = (word) => labelOf(state.tokens.slice(word.first, word.last + 1).map((t) => (t ? t.text : "")).join(""));
