// The session's status and what it allows: the badge, pause / resume, the decision and who
// made it, how generation stopped.
import { STATUS, STATUS_GROUP } from "./protocol.js";
import { command, waitingFor } from "./commands.js";
import { notify } from "./notice.js";
import { $, data, fill, L } from "./page.js";
import { setStatus, store } from "./store.js";

const FINAL = new Set(STATUS_GROUP.FINAL);
const ENDED = new Set(STATUS_GROUP.ENDED);
const RESUMABLE = new Set(STATUS_GROUP.RESUMABLE); // a failed session resumes from its stored tokens
const MAY_RUN = new Set(STATUS_GROUP.MAY_RUN); // a generated text runs again once an edit reopens it
const LANG = document.documentElement.lang || undefined;
const DATE_TIME = new Intl.DateTimeFormat(LANG, { dateStyle: "medium", timeStyle: "short" });
const state = store.state;

const statusLabel = (status) => data.statusLabels[status] || status;

// A press meant as Pause that lands just after a policy (or another reviewer) paused must not
// resume: within this long of such a pause, a resume asks for a second press. After a pause
// this page asked for, a press is meant as Resume.
const JUST_PAUSED_MS = 1000;
const OWN_PAUSE_MS = 10_000; // a pause that comes this soon after this page asked is its own
let pausedAt = -Infinity;
let askedPauseAt = -Infinity;

// A generation from an application is worked on by the reviewer holding its claim (anyone may
// pause it): the others see its resume and decision greyed, with why.
const claimHolder = () => (state.claim || data.claim || {}).claimed_by ?? null;

function claimedByOther() {
  if (!data.onFloor) return false;
  return claimHolder() !== data.user;
}

// A failed generation's claim ended with it: whoever resumes it takes the claim, unless
// someone took it meanwhile.
const retryTakenByOther = () => data.onFloor && ![null, data.user].includes(claimHolder());

function lockForClaim(button, locked) {
  button.disabled = button.disabled || locked;
  if (locked) {
    button.title = L.claimFirst;
    button.setAttribute("aria-describedby", "claim-first");
  } else {
    button.removeAttribute("title");
    button.removeAttribute("aria-describedby");
  }
}

function renderStatus(status) {
  if (status === STATUS.PAUSED && $("status").dataset.status !== STATUS.PAUSED) {
    const own = performance.now() - askedPauseAt < OWN_PAUSE_MS;
    pausedAt = own ? -Infinity : performance.now();
  }
  const badge = $("status");
  badge.textContent = statusLabel(status);
  badge.dataset.status = status;
  badge.className = `badge status-${status}`;
  document.body.dataset.status = status;
  // How generation stopped is true only while it stays stopped: an edit reopens the text.
  if (status === STATUS.RUNNING || status === STATUS.PAUSED) $("stop-reason").hidden = true;
  renderControls();
}

export function renderControls() {
  renderRunButton();
  $("connection").hidden = ENDED.has(state.status); // nothing live to show any more
  $("decision-panel").hidden = !(state.status === STATUS.PAUSED || state.status === STATUS.GENERATED);
  const deciding = waitingFor("approve", "reject");
  for (const name of ["approve", "reject"]) {
    $(name).disabled = deciding;
    lockForClaim($(name), claimedByOther());
  }
  $("claim-first").hidden = !claimedByOther(); // in words, beside the greyed buttons
  if (FINAL.has(state.status)) {
    const note = state.status === STATUS.FAILED ? state.error : state.decisionComment;
    $("decided-panel").hidden = false;
    $("decided-text").replaceChildren(...decidedParts(statusLabel(state.status), note));
    renderDecidedBy();
  } else if (state.status === STATUS.RUNNING) {
    $("decided-panel").hidden = true; // a failed session resumed
  }
}

// "approved: <comment>": the comment (or the error) is someone's own words, never translated.
function decidedParts(label, note) {
  if (!note) return [label];
  const [before, after] = L.decided.replace("%(status)s", label).split("%(note)s");
  const quoted = Object.assign(document.createElement("span"), { textContent: note, translate: false });
  return [before, quoted, after || ""];
}

function renderRunButton() {
  const button = $("toggle-run");
  if (!button) return; // an ended session is rendered without one
  const running = state.status === STATUS.RUNNING;
  const resumable = RESUMABLE.has(state.status);
  const live = running || resumable;
  if (!MAY_RUN.has(state.status)) {
    $("run-controls").remove(); // nothing can run again: no greyed control is left behind
    return;
  }
  $("run-controls").hidden = !live;
  // A pause or resume still waiting for its answer: a second press would only be refused.
  button.disabled = !live || waitingFor("pause", "resume");
  const failed = state.status === STATUS.FAILED;
  lockForClaim(button, resumable && (failed ? retryTakenByOther() : claimedByOther()));
  button.textContent = running ? L.pause : L.resume;
  button.classList.toggle("paused", resumable);
}

// Who decided and when, in the page's language and the reader's time zone.
function renderDecidedBy() {
  const decision = state.decision;
  const box = $("decided-by");
  box.hidden = !decision || state.status === STATUS.FAILED;
  if (box.hidden) return;
  const time = document.createElement("time");
  time.dateTime = decision.time;
  time.textContent = DATE_TIME.format(new Date(decision.time));
  const [before, after] = fill(L.decidedBy, { actor: "\u0000", time: "\u0001" }).split("\u0001");
  const [start, middle] = before.split("\u0000");
  const who = Object.assign(document.createElement("strong"), { textContent: decision.actor, translate: false });
  box.replaceChildren(start, who, middle, time, after || "");
}

export function showStopReason(reason) {
  const text = (L.stopReasons || {})[reason];
  if (!text) return;
  const box = $("stop-reason");
  box.textContent = fill(text, { limit: data.maxNewTokens });
  box.hidden = false;
}

// The button's guards hold for the space bar too: nothing while it is disabled (greyed for a
// claim, or a press that would only be refused) or its command is on its way.
export function toggleRun() {
  const name = { running: "pause", paused: "resume", failed: "resume" }[state.status];
  if (!name || !$("toggle-run") || $("toggle-run").disabled || waitingFor("pause", "resume")) return;
  if (name === "resume" && performance.now() - pausedAt < JUST_PAUSED_MS) {
    pausedAt = -Infinity; // the next press resumes
    notify(L.justPaused);
    return;
  }
  const from = state.status;
  if (name === "pause") askedPauseAt = performance.now();
  const sent = command(name);
  renderControls();
  sent
    .then(() => {
      renderControls();
      if (state.status !== from) return;
      // Its status event is still on the way; until then a press would only be refused.
      if ($("toggle-run")) $("toggle-run").disabled = true;
      setTimeout(renderControls, 3000); // never leave it disabled for good
    })
    .catch((error) => {
      notify(error.message, true);
      renderControls();
    });
}

// What is wrong with the comment, said under it (on a phone the notice at the top of the
// page is off screen by then); "" clears it.
function commentError(text) {
  const box = $("decision-comment");
  $("decision-error").textContent = text;
  $("decision-error").hidden = !text;
  if (text) box.setAttribute("aria-invalid", "true");
  else box.removeAttribute("aria-invalid");
}

// A click or Ctrl+Enter: nothing while a decision is on its way or the button is greyed.
export function decide(name) {
  if ($("decision-panel").hidden || $(name).disabled || waitingFor("approve", "reject")) return;
  const box = $("decision-comment");
  const comment = box.value.trim();
  if (name === "reject" && !comment) {
    commentError(L.commentRequired);
    box.focus({ preventScroll: true });
    box.scrollIntoView({ block: "center" });
    return;
  }
  commentError("");
  const sent = command(name, { comment });
  renderControls();
  sent
    .then(() => {
      store.set({ decisionComment: comment, decision: { actor: data.user, time: new Date().toISOString() } });
      setStatus(name === "approve" ? STATUS.COMPLETED : STATUS.REJECTED); // its status event may lag
    })
    .catch((error) => {
      notify(error.message, true);
      renderControls();
    });
}

const typing = (target) => target.closest("input, textarea, select, button, [contenteditable]");

export function bindControls() {
  store.subscribe("status", renderStatus);
  store.subscribe("decision", renderControls);
  store.subscribe("claim", renderControls);
  $("toggle-run")?.addEventListener("click", toggleRun);
  $("approve").addEventListener("click", () => decide("approve"));
  $("reject").addEventListener("click", () => decide("reject"));
  $("decision-comment").addEventListener("input", (e) => e.target.value.trim() && commentError(""));
  document.addEventListener("keydown", (e) => {
    if (e.code !== "Space" || typing(e.target) || e.repeat || $("keys-help")?.open) return;
    e.preventDefault(); // the space bar pauses and resumes; it must not scroll the page
    toggleRun();
  });
}
