// The pause panel: why it paused, where, what the model could write next (each a button
// that has it written and continues), and the confidence so far.
import { COMMAND } from "./protocol.js";
import { command, waitingFor } from "./commands.js";
import { seenLength, textOf } from "./fold.js";
import { notifyError } from "./notice.js";
import { $, data, fill, L, line, nats } from "./page.js";
import { policyName, reasonText } from "./reasons.js";
import { shownPause, store } from "./store.js";
import { alternativeWord, isSpecial, percent, plainLabel, startsWord, tailWords, visible } from "./words.js";

const state = store.state;

function renderPause() {
  const pause = shownPause();
  $("pause-panel").hidden = !pause;
  $("pause-attention-card").hidden = !(pause && pause.attention && pause.attention.layers && !pause.attentionStale);
  if (!pause) return;
  renderReason(pause);
  renderMute(pause);
  renderAlternatives(pause.alternatives || []);
  renderDetailsState(pause);
  // The history covers the tokens written; the pause is about the next one: its point last.
  const next = nextSignals(pause);
  renderSpark("probability", [...((pause.history && pause.history.probability) || []), next.top1], 1);
  renderSpark("entropy", [...((pause.history && pause.history.entropy) || []), next.entropy], null);
}

// The look-ahead and the vault snapshot are read after the pause is shown.
function renderDetailsState(pause) {
  const pending = Boolean(pause.lookahead && pause.lookahead.pending) && (pause.alternatives || []).length > 0;
  $("previews-pending").hidden = !pending;
  $("alternatives").setAttribute("aria-busy", String(pending));
  const saved = $("pause-saved");
  saved.hidden = !pause.snapshot;
  if (pause.snapshot) saved.textContent = fill(L.stateSaved, { size: megabytes(pause.snapshot.bytes) });
}

const megabytes = (bytes) => fill(L.megabytes, { n: (bytes / 1048576).toFixed(bytes < 10485760 ? 1 : 0) });

function nextSignals(pause) {
  const signals = (pause.evidence && pause.evidence.signals) || {};
  const first = (pause.alternatives || [])[0];
  if (pause.edited) return { top1: first ? first.prob : null, entropy: pause.nextEntropy ?? null };
  return { top1: signals.top1_prob ?? (first ? first.prob : null), entropy: signals.entropy ?? null };
}

function renderReason(pause) {
  const box = $("pause-reason");
  box.textContent = "";
  if (pause.kind === "reopen") {
    box.appendChild(line(L.reopened, "reason-main"));
  } else if (pause.kind === "manual" || pause.trigger === "manual") {
    box.appendChild(line(L.manual, "reason-main"));
  } else {
    const head = line("", "reason-main");
    head.append(fill(L.labelled, { label: L.policy }), Object.assign(document.createElement("strong"), { textContent: policyName(pause.trigger) }));
    box.append(head, line(reasonText(pause), "reason-text"));
  }
  if (pause.span) {
    const matched = line(fill(L.labelled, { label: L.matched }), "reason-match");
    matched.appendChild(Object.assign(document.createElement("mark"), { textContent: textOf(state.tokens).slice(pause.span[0], pause.span[1]), translate: false }));
    box.appendChild(matched);
  }
  box.appendChild(whereLine(pause));
}

// "Paused after “…the last words”": where it stopped, in the words a reviewer reads; a
// pause inside a word (the likeliest next piece continues it) says so.
function whereLine(pause) {
  const text = textOf(state.tokens);
  const words = tailWords(text, 5);
  const where = line("", "reason-where small");
  if (!words) {
    where.textContent = L.pausedAtStart;
    return where;
  }
  const next = (pause.alternatives || [])[0];
  const inside = next && next.text && !startsWord(text, next.text);
  const [before, after] = (inside ? L.pausedInsideWord : L.pausedAfter).split("%(words)s");
  const quoted = Object.assign(document.createElement("span"), { textContent: `…${words}`, translate: false });
  where.append(before, quoted, after || "");
  return where;
}

// Mute the policy that paused, for the rest of this session (or undo it).
function renderMute(pause) {
  const button = $("mute-policy");
  const policy = pause && pause.kind !== "manual" && pause.trigger !== "manual" ? pause.trigger : null;
  button.hidden = !policy;
  if (!policy) return;
  const muted = (state.muted || data.mutedPolicies || []).includes(policy);
  button.textContent = (muted ? L.unmute : L.mute).replace("%(policy)s", policyName(policy));
  button.onclick = () => command(muted ? COMMAND.UNMUTE : COMMAND.MUTE, { policy }).catch(notifyError);
}

function renderAlternatives(alternatives) {
  const list = $("alternatives");
  list.textContent = "";
  if (!alternatives.length) list.appendChild(line(L.noAlternatives, "muted"));
  const best = alternatives.length ? alternatives[0].prob : 1;
  const branches = new Map(((state.pause && state.pause.lookahead) || { branches: [] }).branches.map((b) => [b.token_id, b]));
  const context = textOf(state.tokens);
  for (const alt of alternatives) {
    const item = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.className = "alt";
    button.dataset.tokenId = alt.token_id;
    const bar = Object.assign(document.createElement("span"), { className: "bar" });
    bar.style.width = `${Math.max(2, (alt.prob / best) * 100)}%`;
    const word = alternativeLabel(alt, branches.get(alt.token_id), context);
    button.append(word.label, bar, Object.assign(document.createElement("span"), { className: "prob", textContent: percent(alt.prob) }));
    if (word.preview) button.append(word.preview);
    button.addEventListener("click", () => chooseAlternative(alt.token_id));
    item.appendChild(button);
    list.appendChild(item);
  }
}

// An alternative as the word it would start, and (with a look-ahead) its sentence.
function alternativeLabel(alt, branch, context) {
  const label = Object.assign(document.createElement("span"), { className: "alt-word" });
  const plain = plainLabel(alt.text, L, branch && branch.ids.length === 1 && branch.ends);
  const added = branch ? branch.text : alt.text;
  const found = plain && !branch ? null : alternativeWord(context, added);
  if (plain && (!found || isSpecial(alt.text) || branch?.ends)) {
    label.textContent = plain;
    label.classList.add("plain");
    return { label, preview: null };
  }
  if (!found) {
    label.textContent = visible(alt.text, L) || alt.text;
    return { label, preview: null };
  }
  label.textContent = found.word;
  label.translate = false;
  if (!branch) return { label, preview: null };
  const preview = Object.assign(document.createElement("span"), { className: "alt-preview", translate: false });
  const mark = Object.assign(document.createElement("mark"), { textContent: found.word });
  preview.append(`…${found.before ? `${found.before} ` : ""}`, mark, `${found.after}${branch.ends ? "" : "…"}`);
  if (branch.ends) preview.append(` (${L.endHere})`);
  return { label, preview };
}

// The choice is applied to the frozen state first; then generation continues from it. One
// choice at a time: a double click (or a key pressed twice) sends it once.
function chooseAlternative(tokenId) {
  if (waitingFor(COMMAND.CHOOSE, COMMAND.RESUME)) return;
  // Said when it goes (an edit before it may still be on its way): the text it was chosen on.
  command(COMMAND.CHOOSE, { token_id: tokenId }, () => ({ seen_length: seenLength(state.tokens) }))
    .then(() => command(COMMAND.RESUME))
    .catch(notifyError);
}

// Alternative `index` (from 0) at the open pause, taken; false when there is none.
export function choose(index) {
  const alternative = state.status === "paused" && state.pause && (state.pause.alternatives || [])[index];
  if (alternative) chooseAlternative(alternative.token_id);
  return Boolean(alternative);
}

function renderSpark(name, values, fixedMax) {
  const svg = $(`spark-${name}`);
  const numbers = values.filter((v) => typeof v === "number");
  const max = fixedMax || Math.max(0.001, ...numbers);
  const step = values.length > 1 ? 200 / (values.length - 1) : 0;
  const points = values
    .map((v, i) => (typeof v === "number" ? `${(i * step).toFixed(1)},${(34 - (v / max) * 32).toFixed(1)}` : null))
    .filter(Boolean)
    .join(" ");
  svg.innerHTML = `<polyline fill="none" stroke-width="1.5" points="${points}"></polyline>`;
  const last = numbers.length ? numbers[numbers.length - 1] : null;
  $(`spark-${name}-last`).textContent = last === null ? "" : name === "probability" ? percent(last) : nats(last);
}

export function bindPausePanel() {
  for (const topic of ["pause", "status"]) store.subscribe(topic, renderPause);
  store.subscribe("muted", () => renderMute(shownPause()));
}
