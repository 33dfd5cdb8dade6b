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
const PERCENTS = [];
const percentFormat = (digits) =>
  (PERCENTS[digits] ??= new Intl.NumberFormat(LANG, { style: "percent", maximumFractionDigits: digits }));
// At most this many decimals more than a number's usual ones, to tell it from a threshold.
const MORE_DIGITS = 8;

// One format for every probability on the page: the reason, the list, the sparkline, tips.
// Whole percentages; with `digits`, up to that many decimals, none where they would be zeros
// (9.7%, 10%). A share too small to show reads "<1%" (or "<0.1%", ...), never "0%".
export function percent(p, digits = 0) {
  if (typeof p !== "number" || Number.isNaN(p)) return "";
  const least = 10 ** -(digits + 2);
  return p > 0 && p < least / 2 ? `<${percentFormat(digits).format(least)}` : percentFormat(digits).format(p);
}

// A measure that is not a share (entropy, a score): two decimals, or up to `digits` with
// the zeros past the second left off (0.097, 0.10); a whole number as it is.
export function decimal(value, digits = 2) {
  if (typeof value !== "number" || Number.isNaN(value)) return "";
  if (Number.isInteger(value) || !Number.isFinite(value)) return String(value);
  const [whole, decimals = ""] = value.toFixed(Math.max(2, digits)).split(".");
  return `${whole}.${decimals.slice(0, 2)}${decimals.slice(2).replace(/0+$/, "")}`;
}

// How a reason shows a number: a share as a percentage (from whole percents), any other
// measure with two decimals and more where needed.
const SHARE = { show: percent, least: 0, scale: 100 };
const MEASURE = { show: decimal, least: 2, scale: 1 };

// Whether two numbers read the same with `digits` decimals: the same text, or the same
// number rounded ("3" and "3.00").
function readAlike(a, b, digits, { show, scale }) {
  const rounded = (value) => Math.round(value * scale * 10 ** digits);
  return show(a, digits) === show(b, digits) || rounded(a) === rounded(b);
}

// The fewest decimals at which every number of `values` reads apart from `limit` (the
// threshold a policy compared them with), so that a reason never reads "10% is below 10%"
// for 0.097 and 0.1; equal numbers read alike.
export function digitsApart(values, limit, as = MEASURE) {
  if (typeof limit !== "number") return as.least;
  const differing = values.filter((value) => typeof value === "number" && value !== limit);
  for (let digits = as.least; digits < as.least + MORE_DIGITS; digits++) {
    if (!differing.some((value) => readAlike(value, limit, digits, as))) return digits;
  }
  return as.least + MORE_DIGITS;
}

// A policy's evidence as its reason shows it: probabilities as percentages, other measures
// with two decimals, each as precise as it takes to read apart from the threshold it was
// compared with. `keys` are the template's placeholders, `isProbability(key)` says which
// are shares. Returns {key: text} for the numbers among them.
export function reasonNumbers(values, keys, isProbability) {
  const numbers = keys.filter((key) => typeof values[key] === "number");
  const shown = {};
  for (const as of [SHARE, MEASURE]) {
    const alike = numbers.filter((key) => Boolean(isProbability(key)) === (as === SHARE));
    const limit = alike.includes("threshold") ? values.threshold : undefined;
    const others = alike.filter((key) => key !== "threshold").map((key) => values[key]);
    const digits = digitsApart(others, limit, as);
    for (const key of alike) shown[key] = as.show(values[key], digits);
  }
  return shown;
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

// A text's width in units: a CJK character (or a full-width bracket) counts two.
const WIDE = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}\uff00-\uffef]/u;
const units = (text) => [...text].reduce((n, c) => n + (WIDE.test(c) ? 2 : 1), 0);

// `text` as lines of at most `max` units (a figure title joins them with <br>), broken after a space or before a
// bracket; a part longer than a line keeps a line of its own.
export function wrapTitle(text, max) {
  const lines = [];
  let current = "";
  for (const part of text.split(/(?<=\s)|(?=[(（])/u)) {
    if (current.trim() && units(current + part.trimEnd()) > max) {
      lines.push(current.trim());
      current = part;
    } else {
      current += part;
    }
  }
  if (current.trim()) lines.push(current.trim());
  return lines;
}

// One's own words keep the selection's spacing where they have none of their own (the box
// began with " hours"; cleared and typed "severe", the text must not read "2severe"). Emptied,
// or with the same words and only the spacing changed, it is taken as typed.
export function ownWords(typed, selected) {
  if (!typed.trim() || typed.trim() === selected.trim()) return typed;
  const lead = /^\s/.test(typed) ? "" : selected.match(/^\s*/)[0];
  const trail = /\s$/.test(typed) || !selected.trim() ? "" : selected.match(/\s*$/)[0];
  return lead + typed + trail;
}
