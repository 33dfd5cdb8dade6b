// A span of the text (UTF-16 units, as the page counts: the editor's selection, a word whose
// menu is open, a command prepared on them) carried through a change of the text, exactly or
// not at all. Pure functions; tracked-spans.js applies them as the text changes.
import { toUnits } from "./fold.js";

// Through an applied edit (an `edited` or `truncated` event: its `char_start`..`char_end` of
// `before`, in characters, became `text_after`): a span wholly before the edited span stays,
// one wholly after it moves by what the edit added or removed; one that overlaps it (or an
// event that does not describe `before`) has no exact place: null. The text on the span's
// untouched side must read the same in `after`, the span included.
export function remapThroughEdit(before, after, event, span) {
  if (typeof event.char_start !== "number" || typeof event.char_end !== "number") return null;
  const start = toUnits(before, event.char_start);
  const end = toUnits(before, event.char_end);
  const removed = event.text_before ?? "";
  if (before.slice(start, end) !== removed) return null;
  if (span.end <= start) {
    return after.slice(0, span.end) === before.slice(0, span.end) ? { start: span.start, end: span.end } : null;
  }
  if (span.start >= end) {
    const delta = (event.text_after ?? "").length - removed.length;
    const moved = { start: span.start + delta, end: span.end + delta };
    return after.slice(moved.start) === before.slice(span.start) ? moved : null;
  }
  return null;
}

// Through a change at the end of the text (tokens written, the engine's rollback, a stop
// string cut): the span stays while everything up to its end reads the same.
export const remapThroughTail = (before, after, span) =>
  after.startsWith(before.slice(0, span.end)) ? { start: span.start, end: span.end } : null;

// The position of the first token that starts `offset` units into the text; -1 when no token
// starts there (the offset falls inside one, or past the end).
export function tokenAt(tokens, offset) {
  let at = 0;
  for (let position = 0; position < tokens.length; position += 1) {
    if (at === offset) return position;
    if (at > offset) return -1;
    at += tokens[position] ? tokens[position].text.length : 0;
  }
  return -1;
}
