// The numbers in a policy's reason: a value and the threshold it was compared with never read
// alike when they differ (words.js reasonNumbers, used by reasons.js).
import assert from "node:assert/strict";
import { test } from "node:test";

import { decimal, digitsApart, percent, reasonNumbers } from "../static/reviewer/words.js";

const LOW_CONFIDENCE = ["top1_prob", "threshold"];
const isShare = (key) => /prob/.test(key) || key === "threshold";

test("a probability just below its threshold shows the decimal that tells them apart", () => {
  assert.deepEqual(reasonNumbers({ top1_prob: 0.097, threshold: 0.1 }, LOW_CONFIDENCE, isShare), {
    top1_prob: "9.7%",
    threshold: "10%",
  });
  assert.deepEqual(reasonNumbers({ top1_prob: 0.34996, threshold: 0.35 }, LOW_CONFIDENCE, isShare), {
    top1_prob: "34.996%",
    threshold: "35%",
  });
});

test("round numbers stay round where whole percents already differ", () => {
  assert.deepEqual(reasonNumbers({ top1_prob: 0.08, threshold: 0.35 }, LOW_CONFIDENCE, isShare), {
    top1_prob: "8%",
    threshold: "35%",
  });
  assert.deepEqual(reasonNumbers({ top1_prob: 0.1, threshold: 0.1 }, LOW_CONFIDENCE, isShare), {
    top1_prob: "10%",
    threshold: "10%",
  }); // equal numbers may read alike
});

test("a tiny probability reads as a bound, and more digits where the bound is the same", () => {
  assert.deepEqual(reasonNumbers({ top1_prob: 0.004, threshold: 0.35 }, LOW_CONFIDENCE, isShare), {
    top1_prob: "<1%",
    threshold: "35%",
  });
  assert.deepEqual(reasonNumbers({ top1_prob: 0.001, threshold: 0.003 }, LOW_CONFIDENCE, isShare), {
    top1_prob: "0.1%",
    threshold: "0.3%",
  });
});

test("measures keep two decimals, and more only to differ from the threshold", () => {
  const keys = ["entropy", "threshold"];
  const none = () => false;
  assert.deepEqual(reasonNumbers({ entropy: 2.5031, threshold: 2.5 }, keys, none), { entropy: "2.503", threshold: "2.50" });
  assert.deepEqual(reasonNumbers({ entropy: 4.166, threshold: 2.5 }, keys, none), { entropy: "4.17", threshold: "2.50" });
  assert.deepEqual(reasonNumbers({ entropy: 3.0004, threshold: 3 }, keys, none), { entropy: "3.0004", threshold: "3" });
});

test("numbers compared with nothing keep their usual form", () => {
  const values = { mean_entropy: 2.8123, mean_similarity: 0.4, start: 10, end: 12 };
  assert.deepEqual(reasonNumbers(values, ["start", "end", "mean_entropy", "mean_similarity"], () => false), {
    start: "10",
    end: "12",
    mean_entropy: "2.81",
    mean_similarity: "0.40",
  });
});

test("the page's other probabilities stay whole percents", () => {
  assert.equal(percent(0.097), "10%");
  assert.equal(percent(0.003), "<1%");
  assert.equal(percent(0.097, 1), "9.7%");
  assert.equal(percent(0.1, 3), "10%");
  assert.equal(decimal(0.1), "0.10");
  assert.equal(decimal(0.1, 4), "0.10");
  assert.equal(decimal(0.09712, 3), "0.097");
  assert.equal(digitsApart([0.097], 0.1), 3);
  assert.equal(digitsApart([0.2], undefined), 2);
});
