// The generated text, drawn as words (words.js groupWords): a reviewer hovers, focuses and
// rolls back to a word, each one element over its tokens' spans; the spans keep each
// token's position and offset for the tracked changes and for selecting text. The
// server-rendered text stays until the replay is complete and has drawn tokens: no
// half-built text shows on the way.
import { textOf } from "./fold.js";
import { $ } from "./page.js";
import { store } from "./store.js";
import { groupWords } from "./words.js";

const state = store.state;
let renderMode = null;
let renderedCount = 0;
let renderedOnce = false;
let drawnWords = []; // [{first, last}] of the words drawn, in order
// {offset, from}: where the focus goes once the text is drawn again (focusWordNear), unless
// it has left `from` (the word it was on when asked, or none) meanwhile.
let focusOnDraw = null;

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
  if (focused && !box.contains(focused)) box.querySelector(`.word[data-first="${focused.dataset.first}"]`)?.focus({ preventScroll: true });
  if (focusOnDraw !== null) {
    const { offset, from } = focusOnDraw;
    focusOnDraw = null;
    if (focused === from && focusFree()) focusNear(offset); // not where the keys went since
  }
  if (following) box.scrollTop = box.scrollHeight;
}

// The focus is the text's to move: on a word, on the text, or nowhere (dropped to the body).
const focusFree = () => {
  const active = document.activeElement;
  return !active || active === document.body || $("tokens").contains(active);
};

function focusNear(offset) {
  const words = [...$("tokens").querySelectorAll(".word:not(.blank)")];
  const word = words.filter((element) => +element.dataset.start <= offset).pop() || words[0];
  if (word) {
    word.focus({ preventScroll: true });
    word.scrollIntoView({ block: "nearest" });
  } else $("tokens").focus({ preventScroll: true });
}

// Focus the word at `offset` units into the text (the last word starting there or before it):
// after a replacement or a rollback, where the keys go on from, as after Escape. `redrawn`:
// again once the text is drawn anew (the change applied), unless the focus went elsewhere.
export function focusWordNear(offset, redrawn = false) {
  if (redrawn && renderMode !== null) focusOnDraw = { offset, from: wordOf(document.activeElement) };
  else if (!redrawn || focusFree()) focusNear(offset);
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
  store.subscribe("tokens", scheduleRender);
  store.subscribe("status", () => scheduleRender("full"));
}
