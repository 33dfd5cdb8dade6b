// The event log folded into the current tokens: pure functions over a view
// {tokens, ids, liveRows, pause}. tokens[position] = {text, probability, entropy,
// alternatives, edited}; ids[position] is its token id. Tokens are keyed by position, so a
// replay after a reconnect never duplicates them; `edited` / `truncated` events (a reviewer's
// edit, or rollback to a position) carry the full text and ids; a `rollback` event (the
// engine's, of drifting tokens) cuts the tokens at `removed_from`. The same fold runs on the
// server (the shared cases: tests/fold_vectors.json).
import { EVENT } from "./protocol.js";

export const textOf = (tokens) => tokens.map((t) => (t ? t.text : "")).join("");

// The server counts characters (code points); the DOM counts UTF-16 units (an emoji is two).
export const toCodePoints = (text, units) => Array.from(text.slice(0, units)).length;
// The length of the text the page shows, as the server counts it: a command that acts on
// offsets says what it saw, and is refused on another text.
export const seenLength = (tokens) => Array.from(textOf(tokens)).length;
export const toUnits = (text, codePoints) => Array.from(text).slice(0, codePoints).join("").length;

export const emptyView = () => ({ tokens: [], ids: [], liveRows: [], pause: null });

// Cut everything from `position` on (the tokens, their ids and their live attention rows).
function cut(view, position) {
  view.tokens.length = Math.min(view.tokens.length, position);
  view.ids.length = Math.min(view.ids.length, position);
  view.liveRows.length = Math.min(view.liveRows.length, position);
}

// A drawn token; true when it was appended (not a redraw of a position seen before).
export function foldToken(view, event) {
  const position = event.position;
  const appended = position === view.tokens.length;
  cut(view, position);
  view.tokens[position] = {
    text: event.text,
    probability: event.probability,
    entropy: event.entropy,
    alternatives: event.alternatives || [],
  };
  view.ids[position] = event.token_id;
  if (event.attention && event.attention.length) view.liveRows[position] = event.attention;
  return appended;
}

export function foldRollback(view, event) {
  cut(view, event.removed_from);
}

// The pause opens; its matched span, in the server's characters, becomes UTF-16 units.
export function foldPause(view, event) {
  view.pause = event;
  if (event.span) event.span = event.span.map((i) => toUnits(event.text ?? textOf(view.tokens), i));
}

// An applied edit: the tokens before its start stay; from there on each piece the worker
// sent, or (without them, or if they do not add up to the text) one "edited" piece holding
// the new text. Returns what the open pause needs: where the kept tokens end and the pieces.
export function foldEdit(view, event) {
  let keep = Math.min(event.token_start ?? 0, view.tokens.length);
  let prefix = textOf(view.tokens.slice(0, keep));
  if (!event.text.startsWith(prefix)) {
    keep = 0;
    prefix = "";
  }
  const rest = event.text.slice(prefix.length);
  const pieces = Array.isArray(event.tokens) ? event.tokens : [];
  const exact =
    keep === event.token_start &&
    pieces.length === event.token_ids.length - keep &&
    pieces.map((piece) => piece.text).join("") === rest;
  const before = untouchedAfter(view, event, keep, prefix.length);
  view.tokens.length = keep;
  let offset = prefix.length;
  for (let position = keep; position < event.token_ids.length; position += 1) {
    const piece = exact ? pieces[position - keep] : { text: position === keep ? rest : "" };
    // Only what the reviewer wrote is marked; a piece of the old text keeps its shading.
    const old = exact ? before.get(`${offset}:${piece.text}`) : null;
    view.tokens[position] = old || { text: piece.text, entropy: piece.entropy, edited: true };
    offset += piece.text.length;
  }
  view.ids = [...event.token_ids];
  view.liveRows.length = Math.min(view.liveRows.length, keep);
  if (view.pause) updatePause(view, event, keep, exact ? pieces : []);
}

// Generation ended. Where a stop string was cut off the text's end (a gateway call's), the
// cut folds as an edit carries its tokens; what is left of the cut token is the model's, not
// a reviewer's, so it is not marked edited.
export function foldFinish(view, event) {
  if (!event.cut) return false;
  foldEdit(view, { ...event.cut, text: event.text });
  for (const token of view.tokens.slice(event.cut.token_start)) if (token) token.edited = false;
  return true;
}

// The tokens after the edited span, by where they will sit in the new text and their text.
function untouchedAfter(view, event, keep, prefixLength) {
  const found = new Map();
  if (event.char_end === undefined) return found;
  const end = toUnits(textOf(view.tokens), event.char_end);
  const delta = (event.text_after || "").length - (event.text_before || "").length;
  let offset = prefixLength;
  for (let position = keep; position < view.tokens.length; position += 1) {
    const token = view.tokens[position];
    if (!token) continue;
    if (offset >= end && !token.edited) found.set(`${offset + delta}:${token.text}`, token);
    offset += token.text.length;
  }
  return found;
}

// The open pause after an edit: its alternatives, look-ahead and attention are the new
// next token's; its history is cut at the edit and continued by the new pieces.
function updatePause(view, event, keep, pieces) {
  const pause = view.pause;
  if (event.alternatives) pause.alternatives = event.alternatives;
  pause.lookahead = event.lookahead || { branches: [] };
  if (event.attention && event.attention.layers) pause.attention = event.attention;
  // The text before the edit point is the same before and after the edit.
  const editStart = event.char_start === undefined ? undefined : toUnits(textOf(view.tokens), event.char_start);
  if (pause.span && editStart !== undefined && editStart < pause.span[1]) {
    pause.span = null; // the matched text was edited away
  }
  if (pause.history) {
    pause.history = {
      probability: [...pause.history.probability.slice(0, keep), ...pieces.map((p) => p.top1 ?? null)],
      entropy: [...pause.history.entropy.slice(0, keep), ...pieces.map((p) => p.entropy ?? null)],
    };
  }
  pause.position = event.token_ids.length;
  pause.edit = event.edit; // the details read after this edit name it
  pause.snapshot = null;
  pause.edited = true;
  pause.attentionStale = !(event.attention && event.attention.layers);
}

// A detail of the open pause read after it was sent (look-ahead, attention, snapshot): kept
// when it belongs to the pause as it stands (the same pause, after the same edit). True when kept.
export function foldPauseDetail(view, event) {
  const pause = view.pause;
  if (!pause || pause.pause_id !== event.pause_id || (pause.edit ?? null) !== event.edit) return false;
  if (event.type === EVENT.LOOKAHEAD) pause.lookahead = { branches: event.branches, ms: event.ms };
  if (event.type === EVENT.PAUSE_ATTENTION) {
    pause.attention = event.attention;
    pause.attentionStale = !(event.attention && event.attention.layers);
  }
  if (event.type === EVENT.SNAPSHOT) pause.snapshot = { bytes: event.bytes, ms: event.ms };
  return true;
}

const FOLDS = {
  [EVENT.TOKEN]: foldToken,
  [EVENT.EDITED]: foldEdit,
  [EVENT.TRUNCATED]: foldEdit,
  [EVENT.ROLLBACK]: foldRollback,
  [EVENT.FINISH]: foldFinish,
};

// A whole log, in sequence order: the token ids and the text it leaves.
export function fold(events) {
  const view = emptyView();
  for (const event of events) FOLDS[event.type]?.(view, event);
  return { tokens: [...view.ids], text: textOf(view.tokens) };
}
