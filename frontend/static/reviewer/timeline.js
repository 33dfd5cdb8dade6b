// The timeline: the session's audit records (GET data.auditUrl), fetched again shortly after
// each event. A decision made elsewhere (another tab, staff) reaches the page through it.
import { STATUS_GROUP } from "./protocol.js";
import { $, data, L, line } from "./page.js";
import { store } from "./store.js";

const FINAL = new Set(STATUS_GROUP.FINAL);
const DECISIONS = ["approve", "reject", "cancel"];
// The records that come with an audit graph (reviewer/lifecycle/reports.py, transitions.py):
// once one is in the trail, "Why it paused" has something to show.
const GRAPHED = new Set(["paused", "flagged", "rolled_back", "failed"]);
const LANG = document.documentElement.lang || undefined;
const TIME = new Intl.DateTimeFormat(LANG, { hour: "numeric", minute: "2-digit", second: "2-digit" });
let timelineTimer = null;

export function refreshTimelineSoon() {
  clearTimeout(timelineTimer);
  timelineTimer = setTimeout(refreshTimeline, 300);
}

export function refreshTimeline() {
  fetch(data.auditUrl, { credentials: "same-origin" })
    .then((response) => (response.ok ? response.json() : { entries: [] }))
    .then((body) => renderTimeline(body.entries))
    .catch(() => {});
}

// Oldest first, in a box of its own height: the box follows its end, where each new entry
// (an edit, a rollback, the decision) arrives, unless the reader has scrolled up to read.
const FOLLOW_SLACK_PX = 8;

function renderTimeline(entries) {
  const list = $("timeline");
  const following = list.scrollHeight - list.scrollTop - list.clientHeight <= FOLLOW_SLACK_PX;
  list.replaceChildren(...entries.map(entryItem));
  if (following) list.scrollTop = list.scrollHeight;
  if (entries.some((entry) => GRAPHED.has(entry.kind))) $("audit-graphs-link").hidden = false;
  noteDecision(entries);
}

function entryItem(entry) {
  const item = document.createElement("li");
  const actor = Object.assign(document.createElement("span"), { className: "muted", textContent: entry.actor });
  if (entry.actor !== L.system) actor.translate = false; // a username
  item.append(
    Object.assign(document.createElement("time"), { textContent: TIME.format(new Date(entry.time)), dateTime: entry.time }),
    " ",
    Object.assign(document.createElement("strong"), { textContent: entry.action }),
    Object.assign(document.createElement("span"), { className: "muted", textContent: " · " }),
    actor
  );
  if (entry.detail) {
    const detail = line(entry.detail, "detail");
    if (entry.quotes) detail.translate = false; // what a person or the model wrote
    item.appendChild(detail);
  }
  return item;
}

function noteDecision(entries) {
  const state = store.state;
  const last = entries.filter((e) => DECISIONS.includes(e.kind)).pop();
  if (!last || !FINAL.has(state.status)) return;
  const comment = last.kind !== "cancel" && last.detail && !state.decisionComment ? last.detail : state.decisionComment;
  store.set({ decision: { actor: last.actor, time: last.time }, decisionComment: comment }, "decision");
}
