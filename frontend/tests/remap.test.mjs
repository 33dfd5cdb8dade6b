// A span of the text carried through a change: exactly, or not at all (remap.js).
import assert from "node:assert/strict";
import { test } from "node:test";

import { remapThroughEdit, remapThroughTail, tokenAt } from "../static/reviewer/remap.js";

// An `edited` event as the worker reports a replacement of before[start:end] by `text`.
function replaced(before, start, end, text) {
  return {
    event: { kind: "replace", char_start: start, char_end: end, text_before: before.slice(start, end), text_after: text },
    after: before.slice(0, start) + text + before.slice(end),
  };
}

const span = (text, word, from = 0) => {
  const start = text.indexOf(word, from);
  return { start, end: start + word.length };
};

test("a span after the edit moves by what the edit added", () => {
  const before = "Dispensing with the patient, I will";
  const { event, after } = replaced(before, 0, 10, "On examination today, the");
  const moved = remapThroughEdit(before, after, event, span(before, " will"));
  assert.deepEqual(moved, span(after, " will"));
  assert.equal(after.slice(moved.start, moved.end), " will");
});

test("a span after the edit moves back by what the edit removed", () => {
  const before = "A 24-hour history of chest pain";
  const { event, after } = replaced(before, 2, 9, "long");
  const moved = remapThroughEdit(before, after, event, span(before, " pain"));
  assert.equal(after.slice(moved.start, moved.end), " pain");
  assert.equal(after, "A long history of chest pain");
});

test("a span before the edit stays where it is", () => {
  const before = "A 24-hour history of chest pain";
  const { event, after } = replaced(before, 26, 31, " ache");
  assert.deepEqual(remapThroughEdit(before, after, event, span(before, " history")), span(before, " history"));
});

test("the same words before the edit and in it: the offsets, not the words, decide", () => {
  // The edit writes " cat" again before the selected " cat": the selection is the old one.
  const before = "the cat";
  const { event, after } = replaced(before, 0, 3, "the cat the");
  assert.equal(after, "the cat the cat");
  assert.deepEqual(remapThroughEdit(before, after, event, span(before, " cat")), { start: 11, end: 15 });
});

test("a span the edit overlaps has no exact place", () => {
  const before = "A 24-hour history of chest pain";
  const { event, after } = replaced(before, 0, 1, "Today, a");
  assert.equal(remapThroughEdit(before, after, event, { start: 0, end: 9 }), null);
  const inside = replaced(before, 21, 31, "back pain");
  assert.equal(remapThroughEdit(before, inside.after, inside.event, span(before, " pain")), null);
});

test("a rollback before the span removes it; one after it leaves it", () => {
  const before = "The patient reports chest pain";
  const cut = before.indexOf(" reports");
  const truncated = { kind: "truncate", char_start: cut, char_end: before.length, text_before: before.slice(cut), text_after: "" };
  const after = before.slice(0, cut);
  assert.equal(remapThroughEdit(before, after, truncated, span(before, " chest")), null);
  assert.deepEqual(remapThroughEdit(before, after, truncated, span(before, " patient")), span(before, " patient"));
});

test("offsets in characters count an emoji once, the page's units twice", () => {
  const before = "😀 ok then";
  // Characters 0..1 (the emoji, two UTF-16 units) become "A".
  const event = { kind: "replace", char_start: 0, char_end: 1, text_before: "😀", text_after: "A" };
  const after = "A ok then";
  assert.deepEqual(remapThroughEdit(before, after, event, span(before, " then")), span(after, " then"));
});

test("an event that does not describe the text it is applied to moves nothing", () => {
  const before = "The patient reports chest pain";
  const event = { kind: "replace", char_start: 0, char_end: 3, text_before: "Our", text_after: "A" };
  assert.equal(remapThroughEdit(before, "A patient reports chest pain", event, span(before, " chest")), null);
  assert.equal(remapThroughEdit(before, before, { kind: "replace" }, span(before, " chest")), null);
});

test("a text that reads otherwise around the span moves nothing", () => {
  // The event says the first word changed; the text after it changed too (not as told).
  const before = "The patient reports chest pain";
  const { event } = replaced(before, 0, 3, "A");
  assert.equal(remapThroughEdit(before, "A patient said chest pain", event, span(before, " pain")), null);
});

test("a change at the end leaves a span whose text up to its end is the same", () => {
  const before = "The patient reports";
  assert.deepEqual(remapThroughTail(before, `${before} chest pain`, span(before, " patient")), span(before, " patient"));
  assert.equal(remapThroughTail(before, "The patient", span(before, " reports")), null);
  assert.deepEqual(remapThroughTail(before, "The patient", span(before, " patient")), span(before, " patient"));
});

test("the token that starts at an offset", () => {
  const tokens = [{ text: "The" }, { text: " mor" }, { text: "" }, { text: "ning" }, { text: "." }];
  assert.equal(tokenAt(tokens, 0), 0);
  assert.equal(tokenAt(tokens, 3), 1);
  assert.equal(tokenAt(tokens, 7), 2); // the empty piece starts the character the next completes
  assert.equal(tokenAt(tokens, 5), -1); // inside " mor"
  assert.equal(tokenAt(tokens, 12), -1); // the end: no token starts there
});
