// How a long context's words share the live heatmap's columns on a narrow screen.
import assert from "node:assert/strict";
import { test } from "node:test";

import { binColumns, columnsFitting } from "../static/reviewer/column-bins.js";

const word = (kind, i) => ({ kind, label: `w${i}`, parts: [[i, 1]] });
const context = (counts) => {
  const columns = [];
  for (const [kind, n] of counts) for (let k = 0; k < n; k += 1) columns.push(word(kind, columns.length));
  return columns;
};

test("it leaves the columns alone when they fit", () => {
  const columns = context([["case", 10], ["generated", 5]]);
  const { columns: shown, size } = binColumns(columns, 15);
  assert.equal(size, 1);
  assert.equal(shown, columns);
});

test("it gives neighbours one column, every position once, in order", () => {
  const columns = context([["case", 300], ["generated", 200]]);
  const { columns: shown, size } = binColumns(columns, 50);
  assert.equal(size, 10);
  assert.ok(shown.length <= 51, `${shown.length} columns`);
  const positions = shown.flatMap((c) => c.parts.map(([p]) => p));
  assert.deepEqual(positions, columns.map((_, i) => i));
  assert.equal(shown[0].label, "w0 … w9");
  assert.equal(shown[0].words, 10);
});

test("it never mixes kinds: the case text's columns stay the case text's", () => {
  const columns = context([["template", 3], ["case", 95], ["generated", 102]]);
  const { columns: shown } = binColumns(columns, 20);
  for (const column of shown) {
    const kinds = new Set(column.parts.map(([p]) => columns[p].kind));
    assert.deepEqual([...kinds], [column.kind]);
  }
  assert.equal(shown[0].kind, "template");
  assert.equal(shown[0].words, 3);
  assert.equal(shown.filter((c) => c.kind === "case").reduce((n, c) => n + c.words, 0), 95);
  const lone = shown.find((c) => c.words === 1);
  assert.ok(!lone || !lone.label.includes("…"), "a column of one word is named by it alone");
});

test("it fits columns at least three pixels wide, and never fewer than a floor", () => {
  assert.equal(columnsFitting(300), 100);
  assert.equal(columnsFitting(30), 24);
  assert.equal(columnsFitting(30, 5), 10);
});
