// Spans of the text that something on the page still acts on (the editor's selection, the
// word whose menu is open, a replacement or rollback not yet sent), carried through every
// change of the text (remap.js): an applied edit moves them exactly, a change at the end
// leaves them; where neither is exact the span is lost, and whoever holds it is told (its
// `changed(span)`), so that it never acts on other words than the reviewer chose.
import { textOf } from "./fold.js";
import { remapThroughEdit, remapThroughTail } from "./remap.js";
import { store } from "./store.js";

const spans = new Set();
const shown = () => textOf(store.state.tokens);

// {start, end, text, lost}: `text` is what the span held when it was taken.
export function track(start, end, changed = null) {
  const base = shown();
  const span = { start, end, text: base.slice(start, end), base, lost: false, changed };
  spans.add(span);
  return span;
}

export const untrack = (span) => span && spans.delete(span);

// Whether the span still holds, now, the text it was taken on.
export const holds = (span) => Boolean(span) && !span.lost && shown().slice(span.start, span.end) === span.text;

// The text changed: the span moved (or stayed), or is lost; its holder is told either way
// (the tokens under it may be new even where its words stayed).
function move(span, moved, after) {
  if (moved) Object.assign(span, moved);
  span.lost = !moved;
  span.base = after;
  if (span.lost) spans.delete(span);
  span.changed?.(span);
}

// `edited` carries the applied event and the text it was applied to.
function edited(detail) {
  if (!spans.size) return;
  const after = shown();
  for (const span of [...spans]) {
    const exact = detail && detail.before === span.base;
    move(span, exact ? remapThroughEdit(span.base, after, detail.event, span) : null, after);
  }
}

// Any other change (it follows `edited` for an edit, which has moved the spans already).
function changedText() {
  if (!spans.size) return;
  const after = shown();
  for (const span of [...spans]) {
    if (span.base !== after) move(span, remapThroughTail(span.base, after, span), after);
  }
}

export function bindTrackedSpans() {
  store.subscribe("edited", edited);
  store.subscribe("tokens", changedText);
}
