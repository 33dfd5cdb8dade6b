// A word's menu: roll back to it, or replace it. Rolling back discards text, so a plain
// click or tap never offers it: the menu opens on an explicit gesture (right-click, a long
// press, or Enter on a focused word). It removes the word from its first piece on, and
// everything after it. The word is carried through any change of the text while its menu is
// open (tracked-spans.js): the menu follows it, or closes saying so where the change leaves
// no exact place for it; a rollback goes out only while the word stands where it stood.
import { COMMAND } from "./protocol.js";
import { command, editApplied } from "./commands.js";
import { closeEditor, openEditor } from "./editor.js";
import { notifyError, notifyTextChanged, textChanged } from "./notice.js";
import { $ } from "./page.js";
import { seenLength } from "./fold.js";
import { tokenAt } from "./remap.js";
import { editable, store } from "./store.js";
import { focusWordNear, wordOf, wordText } from "./stream.js";
import { hideTip } from "./tip.js";
import { holds, track, untrack } from "./tracked-spans.js";

const LONG_PRESS_MS = 550;
const state = store.state;
let pressTimer = null;
let press = null; // the word a finger is on, and when it went down (the event's own time)
let menuWord = null; // the word's span in the text (tracked), while its menu is open
let placeOnDraw = false; // the word moved: the menu moves with it once it is drawn

function tokenMenuRequested(event) {
  const element = wordOf(event.target);
  if (!element || !editable()) return;
  event.preventDefault(); // our menu instead of the browser's
  openMenu(element);
}

function pressStarted(event) {
  const element = wordOf(event.target);
  pressCancelled();
  if (!element || !editable() || event.touches.length !== 1) return;
  press = { element, at: event.timeStamp };
  pressTimer = setTimeout(() => openMenu(element), LONG_PRESS_MS);
}

function pressCancelled() {
  clearTimeout(pressTimer);
  press = null;
}

// A page busy at the time (a script, a redraw) may handle a press's start and end together,
// its timer never due in between: the events' own times still say how long the finger stayed.
function pressEnded(event) {
  const held = press;
  pressCancelled();
  const long = held && event.timeStamp - held.at >= LONG_PRESS_MS;
  if (long && $("token-menu").hidden && editable()) openMenu(held.element);
}

// Only where the text takes a correction now: a key (`r`, Enter) asks here too.
export function openMenu(element) {
  clearTimeout(pressTimer);
  if (!editable()) return;
  window.getSelection()?.removeAllRanges(); // a long press also selects a word
  closeEditor();
  untrack(menuWord);
  const start = +element.dataset.start;
  menuWord = track(start, start + wordText(element).length, wordMoved);
  state.menuPosition = +element.dataset.first;
  $("token-menu").hidden = false;
  place(element);
  hideTip();
  $("rollback-here").focus({ preventScroll: true });
}

function place(element) {
  const menu = $("token-menu");
  const box = element.getBoundingClientRect();
  menu.style.left = `${Math.min(box.left + window.scrollX, window.innerWidth - 260)}px`;
  menu.style.top = `${box.bottom + window.scrollY + 4}px`;
}

export function hideMenu() {
  $("token-menu").hidden = true;
  state.menuPosition = null;
  untrack(menuWord);
  menuWord = null;
}

// The text changed while the menu was open: it follows its word, or closes saying so.
function wordMoved(span) {
  if (span !== menuWord) return;
  const position = span.lost ? -1 : tokenAt(state.tokens, span.start);
  if (position >= 0) {
    state.menuPosition = position;
    placeOnDraw = true;
    return;
  }
  const focused = $("token-menu").contains(document.activeElement);
  hideMenu();
  notifyTextChanged();
  if (focused) focusWordNear(span.start);
}

function menuWordDrawn() {
  if (!placeOnDraw || $("token-menu").hidden) return;
  placeOnDraw = false;
  const element = $("tokens").querySelector(`.word[data-first="${state.menuPosition}"]`);
  if (element) place(element);
}

// Rolls back to the word's first piece as the text stands when the command goes (an edit
// before it may still be on its way); the focus goes to the word before it, which stays.
function rollbackHere() {
  const word = menuWord;
  const focused = $("token-menu").contains(document.activeElement);
  if (!word) {
    hideMenu();
    return;
  }
  if (!holds(word) || tokenAt(state.tokens, word.start) < 0) {
    hideMenu();
    notifyTextChanged();
    if (focused) focusWordNear(word.start);
    return;
  }
  const target = track(word.start, word.end);
  hideMenu();
  const at = Math.max(0, target.start - 1); // the last character kept
  const move = focused ? focusWordNear(at) : null;
  const where = () => {
    const now = holds(target) ? tokenAt(state.tokens, target.start) : -1;
    if (now < 0) throw textChanged();
    return { position: now, seen_length: seenLength(store.state.tokens) };
  };
  command(COMMAND.ROLLBACK, where(), where)
    .then((result) => focused && editApplied(result?.edit).then(() => focusWordNear(Math.max(0, target.start - 1), true, move)))
    .catch(notifyError)
    .finally(() => untrack(target));
}

// The menu's other choice: on a phone a long press is how a word is picked for replacing.
function replaceHere() {
  const word = menuWord;
  hideMenu();
  if (!word) return;
  if (holds(word)) openEditor(word.start, word.end);
  else notifyTextChanged();
}

export function bindMenu() {
  const box = $("tokens");
  box.addEventListener("contextmenu", tokenMenuRequested);
  box.addEventListener("touchstart", pressStarted, { passive: true });
  box.addEventListener("touchend", pressEnded, { passive: true });
  for (const name of ["touchmove", "touchcancel"]) box.addEventListener(name, pressCancelled, { passive: true });
  document.addEventListener("click", (e) => {
    if (!e.target.closest("#token-menu") && !wordOf(e.target)) hideMenu();
  });
  $("rollback-here").addEventListener("click", rollbackHere);
  $("replace-here").addEventListener("click", replaceHere);
  store.subscribe("status", (status) => !editable(status) && hideMenu());
  store.subscribe("drawn", menuWordDrawn);
}
