// Gated attention at a pause: why the model looked at a word, or that it did not.
import assert from "node:assert/strict";
import { test } from "node:test";

import { anchoredWords, anchorOf, gateOf, reasonOf, summaryOf } from "../static/reviewer/attention-gate.js";

const gate = {
  mode: "gated",
  reasons: ["sink", null, "anchor", "anchor", null, "heavy", "window", "window"],
  anchors: [{ name: "diagnosis", start: 2, end: 4 }],
  hit_rate: 0.93,
  kept: 6,
  total: 8,
};

test("a view without a gate, or with a malformed one, has none", () => {
  assert.equal(gateOf({ layers: [] }), null);
  assert.equal(gateOf({ gate: { mode: "gated" } }), null);
  assert.equal(gateOf({ gate }), gate);
});

test("a word the model did not look at has no reason; one it looked at, its position's", () => {
  assert.equal(reasonOf(gate, [[1, 1]]), null);
  assert.equal(reasonOf(gate, [[4, 0.5]]), null);
  assert.equal(reasonOf(gate, [[0, 1]]), "sink");
  assert.equal(reasonOf(gate, [[6, 1], [7, 1]]), "window");
});

test("a word of several positions shows the strongest reason, whatever their order", () => {
  assert.equal(reasonOf(gate, [[1, 1], [2, 1]]), "anchor"); // partly unseen: still looked at
  assert.equal(reasonOf(gate, [[6, 1], [5, 1]]), "heavy");
  assert.equal(reasonOf(gate, [[5, 1], [3, 1]]), "anchor");
});

test("positions past the gate's reasons say nothing", () => {
  assert.equal(reasonOf(gate, [[20, 1]]), undefined);
});

test("a word inside an anchor's positions is named by it", () => {
  assert.equal(anchorOf(gate, [[3, 1]]), "diagnosis");
  assert.equal(anchorOf(gate, [[4, 1]]), null);
});

test("the summary counts kept positions, from the gate or from its reasons", () => {
  assert.deepEqual(summaryOf(gate), { kept: 6, total: 8, hitRate: 0.93, mode: "gated" });
  const bare = { mode: "wide", reasons: [null, "sink", "window"] };
  assert.deepEqual(summaryOf(bare), { kept: 2, total: 3, hitRate: null, mode: "wide" });
});

test("anchors in code points find the case words in UTF-16 units, past an astral character", () => {
  const text = "𝑥 pain, fever"; // 𝑥: one code point, two UTF-16 units
  const words = [
    { start: 0, end: 2 },
    { start: 3, end: 7 },
    { start: 9, end: 14 },
  ];
  // "pain" is code points 2..6, "fever" 8..13
  assert.deepEqual(anchoredWords(text, words, [{ name: "symptoms", start: 8, end: 13 }]), [null, null, "symptoms"]);
  assert.deepEqual(anchoredWords(text, words, [{ name: "s", start: 2, end: 6 }]), [null, "s", null]);
  assert.deepEqual(anchoredWords(text, words, []), [null, null, null]);
});
