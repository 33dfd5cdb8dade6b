// Words, not tokens: how the page groups tokenizer pieces into the words a reviewer reads.
import assert from "node:assert/strict";
import { test } from "node:test";

import { alternativeWord, groupWords, ownWords, plainLabel, startsWord, tailWords, wordHolding, wrapTitle } from "../static/reviewer/words.js";

const tokens = (...texts) => texts.map((text) => ({ text }));

test("a word is the run of pieces between spaces or punctuation", () => {
  assert.deepEqual(groupWords(tokens("The", " pat", "ient", " has", ".")), [
    { first: 0, last: 0 }, { first: 1, last: 2 }, { first: 3, last: 3 }, { first: 4, last: 4 },
  ]);
});

test("a Chinese character is a word of its own", () => {
  assert.deepEqual(groupWords(tokens("病", "人")), [{ first: 0, last: 0 }, { first: 1, last: 1 }]);
  assert.equal(startsWord("病", "人"), true);
});

test("an empty piece joins the word the next piece completes, or the last word at the end", () => {
  assert.deepEqual(groupWords(tokens("I", " felt", "", " 🤒")), [
    { first: 0, last: 0 }, { first: 1, last: 1 }, { first: 2, last: 3 },
  ]);
  assert.deepEqual(groupWords(tokens("I", " felt", "")), [{ first: 0, last: 0 }, { first: 1, last: 2 }]);
});

test("it finds the word holding a position", () => {
  const words = groupWords(tokens("The", " pat", "ient"));
  assert.deepEqual(wordHolding(words, 2), { first: 1, last: 2 });
  assert.equal(wordHolding(words, 7), null);
});

test("the last words of a text are where it stopped", () => {
  assert.equal(tailWords("One two three four five six.", 3), "four five six.");
});

test("an alternative reads as the word it completes", () => {
  assert.deepEqual(alternativeWord("The pat", "ient has"), { word: "patient", before: "The", after: " has", partial: true });
});

test("an end token, a space or a line break reads in plain words", () => {
  const labels = { endHere: "end", specialToken: "special", partCharacter: "part", newLine: "newline", space: "space" };
  assert.equal(plainLabel("<|im_end|>", labels, false), "end");
  assert.equal(plainLabel("\n", labels, false), "newline");
  assert.equal(plainLabel(" ", labels, false), "space");
  assert.equal(plainLabel(" word", labels, false), null);
});

test("a figure's title wraps to lines a phone can show, a CJK character counting two", () => {
  const english = "Earlier words (the case text is marked in yellow above)";
  const lines = wrapTitle(english, 34);
  assert.deepEqual(lines, ["Earlier words (the case text is", "marked in yellow above)"]);
  assert.ok(lines.every((line) => line.length <= 34));
  assert.deepEqual(wrapTitle("此前的词（案例文本在上方以黄色标出）", 34), ["此前的词", "（案例文本在上方以黄色标出）"]);
  assert.deepEqual(wrapTitle("Word", 34), ["Word"]); // short: as it is
});

test("one's own words keep the space the selection began with", () => {
  assert.equal(ownWords("severe", " hours"), " severe"); // not "2severe"
  assert.equal(ownWords("severe", " hours "), " severe ");
  assert.equal(ownWords(" severe", " hours"), " severe");
  assert.equal(ownWords("两小时", "两天"), "两小时"); // no spaces to keep
});

test("one's own words are taken as typed when emptied or only their spacing changed", () => {
  assert.equal(ownWords("", " hours"), "");
  assert.equal(ownWords("hours", " hours"), "hours"); // the reviewer removed the space
});
