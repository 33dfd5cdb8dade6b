// A word's tip: what the model knew about it (its probability, entropy, the alternatives it
// weighed, its share of the attention shown). Hovering is a mouse's: a tap's tip stays until
// the next tap, even when the page moves under the finger (a tap also shows that word's
// attention); a word the keyboard is on shows it while it has the focus.
import { focusWord, tipLine } from "./attention.js";
import { textOf } from "./fold.js";
import { $, chip, fill, L, line, nats } from "./page.js";
import { store } from "./store.js";
import { leastSure, wordOf, wordSpan } from "./stream.js";
import { alternativeWord, percent, plainLabel, visible } from "./words.js";

const state = store.state;

// The word's menu (a long press, a right-click) is what the reader asked for: no tip over it.
const menuOpen = () => !$("token-menu").hidden;

function showTip(element) {
  if (menuOpen()) return;
  const word = wordSpan(element);
  if (!state.tokens[word.last]) return;
  const tip = $("tip");
  tip.textContent = "";
  const least = leastSure(word);
  if (!least) {
    tip.appendChild(line(L.edited));
    const entropy = state.tokens[word.first].entropy;
    if (typeof entropy === "number") tip.appendChild(line(`${L.entropy} ${nats(entropy)}`));
  } else {
    const { token, position } = least;
    const entropy = typeof token.entropy === "number" ? ` · ${L.entropy} ${nats(token.entropy)}` : "";
    tip.appendChild(line(`${L.probability} ${percent(token.probability)}${entropy}`));
    const pieces = word.last - word.first + 1;
    if (pieces > 1) tip.appendChild(line(fill(L.wordPieces, { count: pieces }), "muted"));
    const looked = tipLine(word.first);
    if (looked) tip.appendChild(line(looked));
    tipAlternatives(tip, token.alternatives || [], textOf(state.tokens.slice(0, position)));
  }
  const box = element.getBoundingClientRect();
  tip.hidden = false;
  tip.style.left = `${Math.min(box.left, window.innerWidth - tip.offsetWidth - 8)}px`;
  tip.style.top = `${box.bottom + 6}px`;
}

// What else the model weighed at that piece, each as the word it would have made there.
function tipAlternatives(tip, alternatives, context) {
  if (!alternatives.length) return;
  tip.appendChild(line(L.alternatives, "tip-head"));
  const list = document.createElement("ol");
  for (const alt of alternatives.slice(0, 5)) {
    const item = document.createElement("li");
    const found = plainLabel(alt.text, L, false) ? null : alternativeWord(context, alt.text);
    item.append(chip(found ? found.word : visible(alt.text, L)), ` ${percent(alt.prob)}`);
    list.appendChild(item);
  }
  tip.appendChild(list);
}

export function hideTip() {
  $("tip").hidden = true;
}

// A tap shows what the model knew about the word (a touch screen has no hover). At a
// pause, or once written, a click also shows where that word looked.
function tokenTapped(event) {
  const element = wordOf(event.target);
  if (!element) return;
  if (state.status !== "running" && state.live && window.getSelection()?.isCollapsed !== false) {
    focusWord(+element.dataset.first);
  }
  // The tap that ends a long press comes after its menu opened: it shows no tip over it.
  if (event.pointerType !== "mouse") showTip(element);
}

export function bindTip() {
  const box = $("tokens");
  const hovered = (e) => e.pointerType === "mouse" && wordOf(e.target);
  box.addEventListener("pointerover", (e) => hovered(e) && showTip(hovered(e)));
  box.addEventListener("pointerout", (e) => e.pointerType === "mouse" && hideTip());
  box.addEventListener("click", tokenTapped);
  // A word the keyboard moved to shows its tip too, and a screen reader reads it with it.
  box.addEventListener("focusin", (e) => {
    const element = wordOf(e.target);
    if (!element) return;
    element.setAttribute("aria-describedby", "tip");
    showTip(element);
  });
  box.addEventListener("focusout", (e) => {
    wordOf(e.target)?.removeAttribute("aria-describedby");
    hideTip();
  });
  document.addEventListener("click", (e) => {
    if (!wordOf(e.target)) hideTip(); // a tapped word's tip stays until the next tap
  });
  window.addEventListener("scroll", hideTip, { passive: true });
}
