// Gated attention at a pause, read from the engine's `gate` (the pause attention's
// `attention.gate`, inference/transformers_backend/attention.py): per context position the
// reason the model looked there (sink, window, anchor, heavy, recall) or null where it did
// not. Pure functions: the page draws them (gate-view.js), Node tests them.

export const REASONS = ["sink", "window", "anchor", "heavy", "recall"];
// A word of several positions shows the strongest reason any of them has: an anchor says
// more than "it was recent".
const STRENGTH = ["anchor", "recall", "heavy", "sink", "window"];

// The gate of an attention view, when it holds one that can be read; else null.
export function gateOf(attention) {
  const gate = attention && attention.gate;
  return gate && Array.isArray(gate.reasons) ? gate : null;
}

// The reason behind a word made of `parts` ([[position, fraction]]): null where the model
// looked at none of its positions; undefined where the gate does not cover them.
export function reasonOf(gate, parts) {
  let best;
  for (const [position] of parts) {
    if (position >= gate.reasons.length) continue;
    const reason = gate.reasons[position];
    if (reason === null) {
      if (best === undefined) best = null;
    } else if (best == null || STRENGTH.indexOf(reason) < STRENGTH.indexOf(best)) {
      best = reason;
    }
  }
  return best;
}

// The anchor a word's positions fall in (its name), if any.
export function anchorOf(gate, parts) {
  for (const anchor of gate.anchors || []) {
    if (parts.some(([p]) => p >= anchor.start && p < anchor.end)) return anchor.name;
  }
  return null;
}

// What the summary line says: positions kept of all, the attention mass they hold, the mode.
export function summaryOf(gate) {
  const total = gate.total ?? gate.reasons.length;
  const kept = gate.kept ?? gate.reasons.filter((r) => r !== null).length;
  return { kept, total, hitRate: typeof gate.hit_rate === "number" ? gate.hit_rate : null, mode: gate.mode };
}

// Each case word's anchor name, from the anchors' character spans in the case text (code
// points, as the server counts) and the words' spans (UTF-16 units, as the page counts).
export function anchoredWords(text, words, anchors) {
  if (!anchors || !anchors.length) return words.map(() => null);
  const units = [0];
  for (const character of text) units.push(units[units.length - 1] + character.length);
  const spans = anchors.map((a) => ({ name: a.name, start: units[a.start], end: units[Math.min(a.end, units.length - 1)] }));
  return words.map((word) => {
    const hit = spans.find((span) => word.start < span.end && word.end > span.start);
    return hit ? hit.name : null;
  });
}
