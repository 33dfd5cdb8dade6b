// The page's fold over the shared cases (tests/fold_vectors.json), which the server's fold
// passes too; and how an edit keeps the shading of the text it did not touch.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { emptyView, fold, foldEdit, foldPause, foldPauseDetail, foldToken, textOf, toCodePoints, toUnits } from "../static/reviewer/fold.js";

const VECTORS = JSON.parse(readFileSync(new URL("../../tests/fold_vectors.json", import.meta.url), "utf8"));

for (const { name, events, tokens, text } of VECTORS) {
  test(`it folds: ${name}`, () => {
    assert.deepEqual(fold(events), { tokens, text });
  });
}

test("it counts characters as the server does: an emoji is one", () => {
  assert.equal(toCodePoints("a🤒b", 3), 2);
  assert.equal(toUnits("a🤒b", 2), 3);
});

test("it keeps the old tokens after an edited span, marking only what the reviewer wrote", () => {
  const view = emptyView();
  ["The", " fever", " is", " high"].forEach((text, position) =>
    foldToken(view, { position, token_id: position, text, probability: 0.5, entropy: 1 })
  );
  foldEdit(view, {
    token_start: 1, token_ids: [0, 9, 2, 3], text: "The cough is high", char_start: 3, char_end: 9,
    text_before: " fever", text_after: " cough",
    tokens: [{ text: " cough" }, { text: " is" }, { text: " high" }],
  });
  assert.equal(textOf(view.tokens), "The cough is high");
  assert.deepEqual(view.tokens.map((t) => Boolean(t.edited)), [false, true, false, false]);
  assert.equal(view.tokens[2].probability, 0.5);
});

test("an edit at an open pause moves the pause to the new end and marks its attention stale", () => {
  const view = emptyView();
  foldToken(view, { position: 0, token_id: 1, text: "A", probability: 0.5, entropy: 1 });
  view.pause = { position: 1, span: [0, 1], history: { probability: [0.5], entropy: [1] } };
  foldEdit(view, {
    token_start: 1, token_ids: [1, 2], text: "A b", char_start: 1, char_end: 1,
    text_before: "", text_after: " b", tokens: [{ text: " b", top1: 0.7, entropy: 0.2 }], attention: {},
  });
  assert.equal(view.pause.position, 2);
  assert.equal(view.pause.attentionStale, true);
  assert.deepEqual(view.pause.history, { probability: [0.5, 0.7], entropy: [1, 0.2] });
  assert.deepEqual(view.pause.span, [0, 1]); // the edit came after the matched text
});

test("it fills the open pause with the details read after it, and only its own", () => {
  const view = emptyView();
  foldToken(view, { position: 0, token_id: 5, text: "The", probability: 0.9, entropy: 0.1 });
  foldPause(view, { pause_id: 7, position: 1, attention: {}, lookahead: { branches: [], pending: true } });
  const of = { pause_id: 7, edit: null, position: 1 };
  assert.equal(foldPauseDetail(view, { type: "lookahead", ...of, pause_id: 6, branches: [{ token_id: 1 }], ms: 3 }), false);
  assert.equal(foldPauseDetail(view, { type: "lookahead", ...of, branches: [{ token_id: 2 }], ms: 3 }), true);
  assert.deepEqual(view.pause.lookahead, { branches: [{ token_id: 2 }], ms: 3 });
  assert.equal(foldPauseDetail(view, { type: "pause_attention", ...of, attention: { layers: [[1]] } }), true);
  assert.equal(view.pause.attentionStale, false);
  // After an edit, only the details read after that edit belong to the pause.
  foldEdit(view, { edit: 9, text: "The end", token_start: 1, token_ids: [5, 8], tokens: [{ text: " end" }] });
  assert.equal(foldPauseDetail(view, { type: "snapshot", ...of, bytes: 10, ms: 1 }), false);
  assert.equal(foldPauseDetail(view, { type: "snapshot", ...of, edit: 9, position: 2, bytes: 10, ms: 1 }), true);
  assert.deepEqual(view.pause.snapshot, { bytes: 10, ms: 1 });
});
