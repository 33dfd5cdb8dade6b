// Replacing text at a pause: select words (or pick one from its menu), then a glossary term
// or one's own words. Offsets go to the server in characters (code points). The selection is
// carried through any change of the text while the editor is open (tracked-spans.js): moved
// where the change allows it exactly, else the editor closes and says so; a replacement is
// sent only while the text at the selection is still the text selected.
import { COMMAND } from "./protocol.js";
import { command, editApplied } from "./commands.js";
import { seenLength, textOf, toCodePoints } from "./fold.js";
import { notifyError, notifyTextChanged, textChanged } from "./notice.js";
import { $, data, L } from "./page.js";
import { editable, store } from "./store.js";
import { focusWordNear, wordText } from "./stream.js";
import { holds, track, untrack } from "./tracked-spans.js";
import { ownWords } from "./words.js";

const state = store.state;

export function replaceWord(element) {
  const start = +element.dataset.start;
  openEditor(start, start + wordText(element).length);
}

// Where a DOM position falls in the text, in UTF-16 units; null outside the tokens.
function offsetIn(node, offset) {
  const box = $("tokens");
  if (node === box || (node.classList && node.classList.contains("word"))) {
    // Between the words (or a word's pieces): where the next one starts.
    const next = node.childNodes[offset];
    if (next && next.dataset && next.dataset.start !== undefined) return +next.dataset.start;
    return node === box ? textOf(state.tokens).length : +node.dataset.start + wordText(node).length;
  }
  const element = (node.nodeType === Node.TEXT_NODE ? node.parentElement : node).closest(".tok");
  if (!element || !box.contains(element)) return null;
  return +element.dataset.start + textBefore(element, node) + (node.nodeType === Node.TEXT_NODE ? offset : 0);
}

// The text of `element` before `node` (a token may hold an <ins> mark around part of it).
function textBefore(element, node) {
  let count = 0;
  const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
  while (walker.nextNode() && walker.currentNode !== node) count += walker.currentNode.textContent.length;
  return node.nodeType === Node.TEXT_NODE ? count : 0;
}

function textSelected(hideMenu) {
  if (!editable()) return;
  const selection = window.getSelection();
  if (!selection || selection.isCollapsed || !selection.rangeCount) return;
  const range = selection.getRangeAt(0);
  const start = offsetIn(range.startContainer, range.startOffset);
  const end = offsetIn(range.endContainer, range.endOffset);
  if (start === null || end === null || end <= start) return;
  hideMenu();
  openEditor(start, end);
}

export function openEditor(start, end) {
  untrack(state.selection);
  state.selection = track(start, end, selectionChanged); // {start, end, text, lost}
  const selected = state.selection.text;
  $("edit-selection").textContent = selected;
  $("glossary-filter").value = selected.trim();
  $("edit-text").value = selected;
  $("edit-error").hidden = true;
  $("edit-panel").hidden = false;
  renderGlossary();
  $("edit-panel").scrollIntoView({ block: "nearest" });
}

// The selection grown by a word before or after it (-1, 1): a phone cannot drag a selection
// over words whose long press opens their menu, so "Replace this word" and these reach a phrase.
function widen(side) {
  if (!state.selection) return;
  const words = [...$("tokens").querySelectorAll(".word:not(.blank)")].map((element) => {
    const start = +element.dataset.start;
    return { start, end: start + wordText(element).length };
  });
  const { start, end } = state.selection;
  const next = side < 0 ? words.filter((word) => word.start < start).pop() : words.find((word) => word.end > end);
  if (next) openEditor(Math.min(start, next.start), Math.max(end, next.end));
}

export function closeEditor() {
  $("edit-panel").hidden = true;
  untrack(state.selection);
  state.selection = null;
}

// The text changed where the selection was: the editor closes, saying so, and a keyboard
// user is put back on the text.
function closeTextChanged() {
  const at = state.selection ? state.selection.start : 0;
  const focused = $("edit-panel").contains(document.activeElement);
  closeEditor();
  notifyTextChanged();
  if (focused) focusWordNear(at);
}

function selectionChanged(span) {
  // A replacement on its way settles the editor by its answer (its own edit may land first).
  if (span.lost && span === state.selection && !span.sending) closeTextChanged();
}

function matchingTerms(query) {
  const q = query.trim().toLowerCase();
  if (!q) return data.glossary;
  return data.glossary.filter((t) =>
    [t.term, t.preferred, t.code].some((field) => {
      const value = (field || "").toLowerCase();
      return value && (value.includes(q) || q.includes(value));
    })
  );
}

function renderGlossary() {
  let terms = matchingTerms($("glossary-filter").value);
  const note = $("glossary-note");
  note.hidden = terms.length > 0;
  note.textContent = L.noMatch;
  if (!terms.length) terms = data.glossary;
  $("glossary-terms").replaceChildren(...terms.map(termItem));
}

function termItem(term) {
  const item = document.createElement("li");
  const words = document.createElement("div");
  const preferred = document.createElement("strong");
  preferred.textContent = term.preferred;
  words.append(preferred);
  if (term.code) words.append(" ", Object.assign(document.createElement("span"), { className: "code", textContent: term.code }));
  const plain = Object.assign(document.createElement("div"), { className: "muted small" });
  plain.textContent = `“${term.term}”${term.note ? ` · ${term.note}` : ""}`;
  words.append(plain);
  const use = Object.assign(document.createElement("button"), { type: "button", textContent: L.useTerm });
  use.className = "small-button";
  use.dataset.term = term.id;
  use.addEventListener("click", () => replaceSelection(keepSpacing(term.preferred), term.id));
  item.append(words, use);
  return item;
}

function keepSpacing(replacement) {
  // A selection usually carries the space before a word; the glossary term does not.
  const selected = state.selection ? state.selection.text : "";
  const lead = selected.match(/^\s*/)[0];
  const trail = selected.match(/\s*$/)[0];
  return lead + replacement.trim() + (selected.trim() ? trail : "");
}

function replaceSelection(text, termId) {
  const selection = state.selection;
  if (!selection || selection.sending) return; // one replacement of a selection (Enter twice)
  if (!holds(selection)) {
    closeTextChanged();
    return;
  }
  // The command's own copy of the span: carried on while it waits to go (an edit before it
  // still being applied), and read when it goes.
  const target = track(selection.start, selection.end);
  const offsets = () => {
    if (!holds(target)) throw textChanged();
    const shown = textOf(state.tokens);
    const start = toCodePoints(shown, target.start);
    const end = toCodePoints(shown, target.end);
    // What it was made on: the server refuses it on another text (one this page has not heard of).
    return { start, end, seen: shown.slice(target.start, target.end), seen_length: seenLength(state.tokens) };
  };
  const args = { ...offsets(), text };
  if (termId) args.glossary_term = termId;
  selection.sending = true;
  const open = () => state.selection === selection; // the editor still shows this selection
  command(COMMAND.EDIT, args, offsets)
    .then((result) => {
      selection.sending = false;
      if (open()) applied(target.start, result);
    })
    .catch((error) => {
      selection.sending = false;
      if (!open()) notifyError(error);
      else if (error.textChanged || selection.lost) closeTextChanged();
      else showEditError(error);
    })
    .finally(() => untrack(target));
}

// The replacement is queued: the editor closes, and the focus goes to the word where it
// begins; again once the worker has applied it and the text is drawn anew.
function applied(at, result) {
  const focused = $("edit-panel").contains(document.activeElement);
  closeEditor();
  if (!focused) return;
  const move = focusWordNear(at);
  editApplied(result?.edit).then(() => focusWordNear(at, true, move));
}

// In the panel, where the reviewer is looking (the page's notice may be scrolled away); the
// panel stays open with the text, to be shortened or corrected.
function showEditError(error) {
  if ($("edit-panel").hidden) {
    notifyError(error); // closed meanwhile: the page's notice says it
    return;
  }
  const line = $("edit-error");
  line.textContent = error.message;
  line.hidden = false;
  line.scrollIntoView({ block: "nearest" });
}

// `hideMenu`: a selection closes the word's menu (menu.js, which opens the editor).
export function bindEditor(hideMenu) {
  $("tokens").addEventListener("mouseup", () => setTimeout(() => textSelected(hideMenu), 0));
  $("edit-close").addEventListener("click", closeEditor);
  $("glossary-filter").addEventListener("input", renderGlossary);
  $("edit-apply").addEventListener("click", () => replaceSelection(ownWords($("edit-text").value, state.selection?.text ?? ""), null));
  $("edit-wider-before").addEventListener("click", () => widen(-1));
  $("edit-wider-after").addEventListener("click", () => widen(1));
  store.subscribe("status", (status) => !editable(status) && closeEditor());
}
