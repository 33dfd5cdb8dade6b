// A word's menu: roll back to it, or replace it. Rolling back discards text, so a plain
// click or tap never offers it: the menu opens on an explicit gesture (right-click, a long
// press, or Enter on a focused word). It removes the word from its first piece on, and
// everything after it.
import { COMMAND } from "./protocol.js";
import { command } from "./commands.js";
import { closeEditor, replaceWord } from "./editor.js";
import { notifyError } from "./notice.js";
import { $ } from "./page.js";
import { editable, store } from "./store.js";
import { wordOf } from "./stream.js";
import { hideTip } from "./tip.js";

const LONG_PRESS_MS = 550;
const state = store.state;
let pressTimer = null;
let press = null; // the word a finger is on, and when it went down (the event's own time)

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

export function openMenu(element) {
  clearTimeout(pressTimer);
  window.getSelection()?.removeAllRanges(); // a long press also selects a word
  closeEditor();
  state.menuPosition = +element.dataset.first;
  const menu = $("token-menu");
  const box = element.getBoundingClientRect();
  menu.hidden = false;
  menu.style.left = `${Math.min(box.left + window.scrollX, window.innerWidth - 260)}px`;
  menu.style.top = `${box.bottom + window.scrollY + 4}px`;
  hideTip();
  $("rollback-here").focus({ preventScroll: true });
}

export function hideMenu() {
  $("token-menu").hidden = true;
  state.menuPosition = null;
}

function rollbackHere() {
  const position = state.menuPosition;
  hideMenu();
  if (position === null) return;
  command(COMMAND.ROLLBACK, { position }).catch(notifyError);
}

// The menu's other choice: on a phone a long press is how a word is picked for replacing.
function replaceHere() {
  const element = $("tokens").querySelector(`.word[data-first="${state.menuPosition}"]`);
  hideMenu();
  if (element) replaceWord(element);
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
}
