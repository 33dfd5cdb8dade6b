// Gated attention on the words: at a pause of a gated run, each word the model was not
// looking at is struck through and greyed; each word it looked at carries its reason (sink,
// recent window, anchor, heavy hitter, recall) as a coloured line of its own style above it
// and in its title; a summary line and a legend say the same in words. The anchors of the
// case text are marked from the start (they are always in view when the gate is on).
import { anchoredWords, anchorOf, reasonOf, REASONS, summaryOf } from "./attention-gate.js";
import { $, fill, L } from "./page.js";
import { percent } from "./words.js";

const NUMBER = new Intl.NumberFormat(document.documentElement.lang || undefined);
const MARKS = ["gate-off", ...REASONS.map((reason) => `gate-${reason}`)];

// Draw the gate over the words `groups` (attention-context.js contextWords), each found on
// the page by `elementsOf`.
export function drawGate(gate, groups, elementsOf) {
  for (const group of groups) {
    const reason = reasonOf(gate, group.parts);
    if (reason === undefined) continue;
    const anchor = reason === "anchor" ? anchorOf(gate, group.parts) : null;
    const said = reason === null ? L.gateNotLooked : fill(L.gateLookedAt, { reason: reasonName(reason, anchor) });
    for (const element of elementsOf(group)) {
      element.classList.add(reason === null ? "gate-off" : `gate-${reason}`);
      element.dataset.gate = reason ?? "off";
      element.dataset.gateTitle = element.title || "";
      element.title = element.title ? `${element.title} · ${said}` : said;
    }
  }
}

export function clearGate() {
  for (const element of document.querySelectorAll("[data-gate]")) {
    element.classList.remove(...MARKS);
    element.title = element.dataset.gateTitle || "";
    if (!element.title) element.removeAttribute("title");
    delete element.dataset.gate;
    delete element.dataset.gateTitle;
  }
}

const reasonName = (reason, anchor) => (anchor ? `${L.gateReasonNames[reason]} “${anchor}”` : L.gateReasonNames[reason]);

// The summary and the legend, or nothing where the view has no gate.
export function showGate(gate) {
  const box = $("attention-gate");
  box.hidden = !gate;
  if (!gate) return;
  const { kept, total, hitRate, mode } = summaryOf(gate);
  const line = fill(L.gateSummary, { kept: NUMBER.format(kept), total: NUMBER.format(total) });
  const mass = hitRate === null ? "" : fill(L.gateMass, { share: percent(hitRate) });
  $("attention-gate-summary").textContent = [line + mass, L.gateModes[mode] || ""].join(" ").trim();
  const shown = mode === "recall" ? ["recall"] : REASONS.filter((reason) => reason !== "recall");
  const items = [...shown, "off"].map((reason) => {
    const swatch = Object.assign(document.createElement("span"), { className: `gate-swatch gate-${reason}`, textContent: "abc" });
    swatch.setAttribute("aria-hidden", "true");
    const item = document.createElement("li");
    item.append(swatch, " ", L.gateReasons[reason]);
    return item;
  });
  $("attention-gate-legend").replaceChildren(...items);
}

// The case text's anchors, marked under their words from the page's data.
export function markAnchors(text, words, anchors, elementOf) {
  anchoredWords(text, words, anchors).forEach((name, index) => {
    if (!name) return;
    const element = elementOf(index);
    element.classList.add("anchored");
    element.dataset.anchor = name;
  });
}
