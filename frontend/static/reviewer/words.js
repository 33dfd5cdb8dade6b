// Words, not tokens: what the session page shows a reviewer instead of tokenizer pieces.
// Pure functions over text; the stream (stream.js) draws with them. A word is the run of
// tokens between whitespace or punctuation; a Chinese character (or a token decoding to
// several) is a word of its own; an empty piece (a token ending inside a multi-byte character) joins the word
// the next piece completes. On the session page a reviewer points at, hovers and rolls back
// to words; events and attention rows stay per token underneath.

// The page's language; none where there is no page (the unit tests).
const LANG = globalThis.document?.documentElement.lang || undefined;
const SEGMENTER = typeof Intl.Segmenter === "function" ? new Intl.Segmenter(LANG, { granularity: "word" }) : null;
const BOUNDARY = /[\s\p{P}\p{S}]/u;
const CJK = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/u;
const SPECIAL = /^<\|?[\w./-]+\|?>$|^<\/?s>$/;
const PERCENT = new Intl.NumberFormat(LANG, { style: "percent", maximumFractionDigits: 0 });

// One format for every probability on the page: the reason, the list, the sparkline, tips.
export function percent(p) {
  if (typeof p !== "number" || Number.isNaN(p)) return "";
  return p > 0 && p < 0.005 ? `<${PERCENT.format(0.01)}` : PERCENT.format(p);
}

// Whether a token with text `text` after one with text `previous` begins a new word.
export function startsWord(previous, text) {
  if (previous === null) return true;
  if (text === "") return false;
  if (previous === "") return false;
  const first = text[0];
  const last = previous[previous.length - 1];
  return BOUNDARY.test(first) || BOUNDARY.test(last) || CJK.test(first) || CJK.test(last);
}

// Groups token positions into words: [{first, last}] over tokens[] ({text}). Empty pieces
// (a token ending inside a character) belong to the word the next piece completes, so a
// word rolled back from its first token leaves no half character; empty pieces at the end
// (nothing has completed them yet) stay with the last word.
export function groupWords(tokens) {
  const words = [];
  let previous = null;
  let pending = null; // the first of the empty pieces waiting for the piece completing them
  tokens.forEach((token, position) => {
    if (!token) return;
    if (token.text === "") {
      if (pending === null) pending = position;
      return;
    }
    if (!words.length || startsWord(previous, token.text)) words.push({ first: pending ?? position, last: position });
    else words[words.length - 1].last = position;
    pending = null;
    previous = token.text;
  });
  if (pending !== null) {
    if (words.length) words[words.length - 1].last = tokens.length - 1;
    else words.push({ first: pending, last: tokens.length - 1 });
  }
  return words;
}

// The word holding token `position`, by bisection over groupWords' answer.
export function wordHolding(words, position) {
  let low = 0;
  let high = words.length - 1;
  while (low <= high) {
    const middle = (low + high) >> 1;
    if (words[middle].last < position) low = middle + 1;
    else if (words[middle].first > position) high = middle - 1;
    else return words[middle];
  }
  return null;
}

// Splits text into word and non-word segments: [{text, start, word}].
export function segments(text) {
  if (SEGMENTER) {
    return [...SEGMENTER.segment(text)].map((s) => ({ text: s.segment, start: s.index, word: s.isWordLike }));
  }
  const out = [];
  for (const m of text.matchAll(/[\p{L}\p{N}\p{M}'’-]+|\s+|./gu)) {
    out.push({ text: m[0], start: m.index, word: /[\p{L}\p{N}]/u.test(m[0]) });
  }
  return out;
}

// The last `n` words of `text` (what a reviewer reads as "where it stopped").
export function tailWords(text, n) {
  const recent = text.slice(-300);
  const words = segments(recent).filter((s) => s.word);
  if (!words.length) return "";
  const from = words[Math.max(0, words.length - n)].start;
  return recent.slice(from).trim();
}

export function isSpecial(text) {
  return SPECIAL.test(text.trim());
}

// How an alternative reads when it is not a word: an end token, a space, a line break.
export function plainLabel(text, labels, ends) {
  if (ends || /^<\|?(im_end|endoftext|eot_id|end)\|?>$|^<\/s>$/.test(text.trim())) return labels.endHere;
  if (isSpecial(text)) return labels.specialToken;
  if (text.replace(/\ufffd/g, "") === "") return labels.partCharacter;
  if (/^\n+$/.test(text.replace(/[ \t]/g, ""))) return labels.newLine;
  if (/^\s+$/.test(text)) return labels.space;
  return null;
}

// A piece as a reader sees it: no tokenizer glyphs; a space, line break or control token
// in plain words.
export function visible(text, labels) {
  const plain = plainLabel(text, labels, false);
  if (plain) return plain;
  return text.replace(/\ufffd/g, "").replace(/\n/g, " ").trim();
}

// An alternative as the word it would start, inside its sentence. `context` is the text so
// far, `added` what the alternative (and, with a look-ahead, the words after it) adds.
// Returns {word, before, after, partial}: the word in full (with the part of it already
// written, when the pause is inside a word), the few words before it, and what follows.
export function alternativeWord(context, added) {
  const tail = context.slice(-200);
  const joined = tail + added.replace(/\ufffd/g, "");
  const at = tail.length;
  const parts = segments(joined);
  // The word being formed: the segment across the boundary, else the first word after it.
  let index = parts.findIndex((s) => s.start < at && s.start + s.text.length > at && s.word);
  if (index < 0) index = parts.findIndex((s) => s.start >= at && s.text.trim());
  if (index < 0) return null;
  const word = parts[index];
  const end = word.start + word.text.length;
  return {
    word: word.text,
    before: tailWords(joined.slice(0, word.start), 4),
    after: joined.slice(end).replace(/\s+/g, " ").trimEnd(),
    partial: word.start < at,
  };
}

