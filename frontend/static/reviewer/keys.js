// The session page from the keyboard: every review step without the mouse. `?` lists the keys
// (the #keys-help dialog); the modules that own each step do the work.
import { back, focusWord as showWordAttention } from "./attention.js";
import { toggleClaim } from "./claim.js";
import { decide } from "./controls.js";
import { closeEditor, replaceWord } from "./editor.js";
import { hideMenu, openMenu } from "./menu.js";
import { $ } from "./page.js";
import { choose } from "./pause-panel.js";
import { editable, store } from "./store.js";

const state = store.state;
let box = null;
let intent = "approve"; // what Ctrl+Enter in the comment does: set by `a` or `x`

// The text's stops are its words (stream.js draws them); a space or line break is none.
const WORD = ".word:not(.blank)";
const words = () => [...box.querySelectorAll(WORD)];
const focusedWord = () => document.activeElement?.closest?.(WORD);

function focusWord(element) {
  if (!element) return;
  element.focus();
  element.scrollIntoView({ block: "nearest" });
}

function wordAt(position) {
  // The word just before a position (a pause at p comes after p tokens).
  const all = words();
  return all.filter((w) => +w.dataset.first < position).pop() || all[0];
}

function moveWord(step) {
  const all = words();
  const index = all.indexOf(focusedWord());
  focusWord(all[Math.max(0, Math.min(all.length - 1, index + step))]);
}

function movePause(step) {
  const positions = [...state.pausePositions].sort((a, b) => a - b);
  if (!positions.length) return;
  const here = focusedWord() ? +focusedWord().dataset.last + 1 : step > 0 ? -1 : Infinity;
  const next = step > 0 ? positions.find((p) => p > here) : positions.filter((p) => p < here).pop();
  focusWord(wordAt(next ?? (step > 0 ? positions[positions.length - 1] : positions[0])));
}

function replaceFocused() {
  const word = focusedWord();
  if (!word || !editable()) return;
  replaceWord(word);
  $("edit-text").focus();
  $("edit-text").select();
}

function prepareDecision(name) {
  const comment = $("decision-comment");
  if ($("decision-panel").hidden) return;
  intent = name;
  $("decision-hint").textContent = $("decision-hint").dataset[name];
  $("decision-hint").hidden = false;
  comment.focus();
}

function openHelp() {
  const dialog = $("keys-help");
  if (!dialog.open) dialog.showModal();
}

// Keys that act anywhere but in a text field.
const KEYS = {
  "?": openHelp,
  j: () => movePause(1),
  k: () => movePause(-1),
  a: () => prepareDecision("approve"),
  x: () => prepareDecision("reject"),
  e: replaceFocused,
  w: () => (focusedWord() ? showWordAttention(+focusedWord().dataset.first) : back()),
  n: () => $("next-case") && !$("decided-panel").hidden && $("next-case").click(),
  c: toggleClaim,
  ArrowRight: () => focusedWord() && moveWord(1),
  ArrowLeft: () => focusedWord() && moveWord(-1),
  Home: () => focusedWord() && focusWord(words()[0]),
  End: () => focusedWord() && focusWord(words().pop()),
};

// The shortcut list is modal: behind it no key acts (Escape and its Close button close it).
const helpOpen = () => Boolean($("keys-help")?.open);

function onKey(event) {
  if (event.ctrlKey || event.metaKey || event.altKey || helpOpen()) return;
  const target = event.target;
  if (target.closest("input, textarea, select, [contenteditable]")) return;
  if ((event.key === "Enter" || event.key === "r") && target.closest(WORD)) {
    event.preventDefault();
    if (editable()) openMenu(target.closest(WORD)); // roll back to this word, once confirmed in the menu
    return;
  }
  if (/^[1-5]$/.test(event.key) && choose(+event.key - 1)) {
    event.preventDefault();
    return;
  }
  const run = KEYS[event.key];
  if (!run) return;
  event.preventDefault();
  run();
}

function onMenuKey(event) {
  if (event.key !== "Escape") return;
  const position = state.menuPosition;
  hideMenu();
  focusWord(box.querySelector(`.word[data-first="${position}"]`));
}

function onEditKey(event) {
  if (event.key === "Escape") {
    closeEditor();
    focusWord(remembered());
  } else if (event.key === "Enter" && event.target.id === "edit-text") {
    event.preventDefault();
    $("edit-apply").click();
  }
}

function onCommentKey(event) {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    decide(intent);
  }
}

// Tab into the text lands on the last word, or the one the reviewer was on.
let lastFocused = null;

// The word last focused, or the one drawn in its place since (the text is redrawn on edits).
function remembered() {
  if (!lastFocused || box.contains(lastFocused)) return lastFocused;
  return box.querySelector(`${WORD}[data-first="${lastFocused.dataset.first}"]`);
}

export function bindKeys() {
  box = $("tokens");
  box.addEventListener("focusin", (event) => {
    if (event.target.closest(WORD)) lastFocused = event.target.closest(WORD);
  });
  box.addEventListener("focus", (event) => {
    if (event.relatedTarget && box.contains(event.relatedTarget)) return; // Shift+Tab out of it
    focusWord(remembered() || words().pop());
  });
  document.addEventListener("keydown", onKey);
  $("token-menu").addEventListener("keydown", onMenuKey);
  $("decision-comment").addEventListener("keydown", onCommentKey);
  $("edit-panel").addEventListener("keydown", onEditKey);
  $("keys-help-close").addEventListener("click", () => $("keys-help").close());
  $("keys-help-open").addEventListener("click", openHelp);
}
