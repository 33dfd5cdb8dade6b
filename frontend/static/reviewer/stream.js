// The generated text, drawn as words (words.js groupWords): a reviewer hovers, focuses and
// rolls back to a word, each one element over its tokens' spans; the spans keep each
// token's position and offset for the tracked changes and for selecting text. The
// server-rendered text stays until the replay is complete and has drawn tokens: no
// half-built text shows on the way.
import { textOf } from "./fold.js";
import { $ } from "./page.js";
import { store } from "./store.js";
import { track, untrack } from "./tracked-spans.js";
import { groupWords } from "./words.js";

const state = store.state;
let renderMode = null;
let renderedCount = 0;
let renderedOnce = false;
let drawnWords = []; // [{first, last}] of the words drawn, in order
// {offset, since}: where the focus goes once the text is drawn again (focusWordNear), unless
// it moved after move number `since`.
let focusOnDraw = null;
// The words the focus is on, carried through changes of the text (tracked-spans.js): a
// drawing that replaces their element puts the focus back on them, wherever they moved.
let focusedSpan = null;
// Each move of the focus (a key, a click, a command placing it), not a drawing putting it
// back: a placement asked for once a change lands acts only if nothing moved it since.
let focusMoves = 0;
let restoring = false;

// The word a reviewer points at (never a blank one), and what it spans.
export const wordOf = (target) => target?.closest?.("#tokens .word:not(.blank)") || null;
export const wordSpan = (element) => ({ first: +element.dataset.first, last: +element.dataset.last });
export const wordText = (element) => textOf(state.tokens.slice(+element.dataset.first, +element.dataset.last + 1));

function scheduleRender(mode) {
  if (!state.live || !state.drawn) return;
  if (renderMode === "full") return;
  const first = renderMode === null;
  renderMode = mode;
  if (first) requestAnimationFrame(renderTokens);
}

function renderTokens() {
  const box = $("tokens");
  // The first drawing replaces the server-rendered text.
  const full = renderMode === "full" || renderedCount > state.tokens.length || !renderedOnce;
  renderedOnce = true;
  renderMode = null;
  const focused = wordOf(document.activeElement); // before a full drawing removes it
  if (full) {
    box.textContent = "";
    drawnWords = [];
  }
  // Follow the newest token, unless the reviewer scrolled up to read.
  const following = box.scrollTop + box.clientHeight >= box.scrollHeight - 8;
  const words = groupWords(state.tokens);
  // New tokens change only the last words (one grows, or a piece completes a character):
  // those are drawn again, the words before them stay.
  let kept = 0;
  while (kept < Math.min(words.length, drawnWords.length) && sameWord(words[kept], drawnWords[kept])) kept += 1;
  if (kept < drawnWords.length) removeWordsFrom(box, drawnWords[kept].first);
  let offset = kept < words.length ? textOf(state.tokens.slice(0, words[kept].first)).length : 0;
  const span = state.pause && state.pause.span;
  const fragment = document.createDocumentFragment();
  for (const word of words.slice(kept)) {
    const element = wordElement(word, offset, span);
    offset += element.textContent.length;
    if (element.firstChild) fragment.appendChild(element);
  }
  box.appendChild(fragment);
  drawnWords = words;
  renderedCount = state.tokens.length;
  store.changed("drawn");
  if (focused && !box.contains(focused)) restoreFocus(box, focused);
  if (focusOnDraw !== null) {
    const { offset, since } = focusOnDraw;
    focusOnDraw = null;
    if (since === focusMoves && focusFree()) focusNear(offset);
  }
  if (following) box.scrollTop = box.scrollHeight;
}

// The focus is the text's to move: on a word, on the text, or nowhere (dropped to the body).
const focusFree = () => {
  const active = document.activeElement;
  return !active || active === document.body || $("tokens").contains(active);
};

// The last word starting `offset` units into the text or before it.
function wordNear(offset) {
  const words = [...$("tokens").querySelectorAll(".word:not(.blank)")];
  return words.filter((element) => +element.dataset.start <= offset).pop() || words[0];
}

function focusNear(offset) {
  const word = wordNear(offset);
  if (word) {
    word.focus({ preventScroll: true });
    word.scrollIntoView({ block: "nearest" });
  } else $("tokens").focus({ preventScroll: true });
}

// The focused word's element was drawn anew: the focus goes to the same words where they
// stand now (where they began, if the change went through them).
function restoreFocus(box, lost) {
  const element = focusedSpan ? wordNear(focusedSpan.start) : box.querySelector(`.word[data-first="${lost.dataset.first}"]`);
  restoring = true;
  try {
    element?.focus({ preventScroll: true });
  } finally {
    restoring = false;
  }
}

function focusMoved(event) {
  if (!restoring) focusMoves += 1;
  untrack(focusedSpan);
  const word = wordOf(event.target);
  const start = word ? +word.dataset.start : 0;
  focusedSpan = word ? track(start, start + wordText(word).length) : null;
}

// Focus the word at `offset` units into the text (the last word starting there or before it):
// after a replacement or a rollback, where the keys go on from, as after Escape; returns the
// move's number. `redrawn`: again once the text is drawn anew (the change applied), unless
// the focus moved after move number `since` (the reviewer went on meanwhile).
export function focusWordNear(offset, redrawn = false, since = focusMoves) {
  if (!redrawn) focusNear(offset);
  else if (since !== focusMoves) return focusMoves;
  else if (renderMode !== null) focusOnDraw = { offset, since };
  else if (focusFree()) focusNear(offset);
  return focusMoves;
}

const sameWord = (a, b) => a.first === b.first && a.last === b.last;

function removeWordsFrom(box, first) {
  for (const element of box.querySelectorAll(".word")) if (+element.dataset.first >= first) element.remove();
}

// A word: shaded as one by its least sure piece; a space or line break is no stop for the keys.
function wordElement(word, start, span) {
  const element = document.createElement("span");
  element.className = "word";
  element.dataset.first = word.first;
  element.dataset.last = word.last;
  element.dataset.start = start;
  let offset = start;
  let edited = true;
  for (let position = word.first; position <= word.last; position += 1) {
    const token = state.tokens[position];
    if (!token) continue;
    if (token.text) element.appendChild(tokenElement(token, position, offset, span));
    offset += token.text.length;
    edited = edited && Boolean(token.edited);
  }
  const least = leastSure(word);
  if (!element.textContent.trim()) element.classList.add("blank");
  else element.tabIndex = -1; // focusable from the keyboard (arrow keys move between words)
  if (edited) element.classList.add("edited");
  else if (least) element.style.setProperty("--p", least.token.probability.toFixed(3));
  return element;
}

// The word's confidence: the probability the model gave the least sure of its pieces (what
// its shading and its tip show). Null when no piece has one (an edit wrote it).
export function leastSure(word) {
  let least = null;
  for (let position = word.first; position <= word.last; position += 1) {
    const token = state.tokens[position];
    if (!token || typeof token.probability !== "number") continue;
    if (!least || token.probability < least.token.probability) least = { token, position };
  }
  return least;
}

function tokenElement(token, position, offset, span) {
  const element = document.createElement("span");
  element.className = token.edited ? "tok edited" : "tok";
  element.textContent = token.text;
  element.dataset.pos = position;
  element.dataset.start = offset;
  if (span && offset < span[1] && offset + token.text.length > span[0]) {
    element.classList.add("match");
  }
  return element;
}

export function bindStream() {
  document.addEventListener("focusin", focusMoved);
  store.subscribe("tokens", scheduleRender);
  store.subscribe("status", () => scheduleRender("full"));
}
