// Applying the session's events (reviewer/events/ declares the kinds) to the store: the
// fold (fold.js) moves the tokens; the rest are news for the page. While the page replays
// what happened before it was rendered, only the tokens, heatmaps and open pause are rebuilt.
import { EVENT, STATUS } from "./protocol.js";
import { editSettled } from "./commands.js";
import { showStopReason } from "./controls.js";
import { foldEdit, foldFinish, foldPause, foldPauseDetail, foldRollback, foldToken, textOf } from "./fold.js";
import { notify } from "./notice.js";
import { fill, L } from "./page.js";
import { policyName, reasonText } from "./reasons.js";
import { setStatus, store } from "./store.js";
import { refreshTimelineSoon } from "./timeline.js";

const state = store.state;

const handlers = {
  [EVENT.TOKEN]: (event) => {
    state.drawn = true;
    store.changed("tokens", foldToken(state, event) ? "append" : "full");
  },
  [EVENT.PAUSE]: (event) => {
    if (!state.pausePositions.includes(event.position)) state.pausePositions.push(event.position);
    foldPause(state, event);
    store.changed("tokens", "full");
    store.changed("pause");
  },
  [EVENT.EDITED]: applyEdit,
  [EVENT.TRUNCATED]: applyEdit,
  [EVENT.ROLLBACK]: (event) => {
    state.drawn = true;
    foldRollback(state, event);
    if (state.live) notify(fill(L.labelled, { label: L.rolledBack }) + reasonText(event.decision));
    store.changed("tokens", "full");
  },
  [EVENT.ATTENTION]: (event) => {
    const pause = state.pause;
    if (!pause || !pause.attention || pause.attentionStale || event.position !== pause.position) return;
    pause.attention.heads = event.heads;
    pause.attention.layer = event.layer;
    if (state.live) store.changed("heads");
  },
  [EVENT.LOOKAHEAD]: pauseDetail,
  [EVENT.PAUSE_ATTENTION]: pauseDetail,
  [EVENT.SNAPSHOT]: pauseDetail,
  [EVENT.STATUS]: (event) => {
    if (state.live) setStatus(event.status);
    else if (event.status !== STATUS.PAUSED) state.pause = null; // an old pause, since closed
  },
  [EVENT.FINISH]: (event) => {
    if (foldFinish(state, event)) store.changed("tokens", "full");
    showStopReason(event.reason);
    if (state.live) notify(L.finished);
  },
  [EVENT.FLAG]: (event) => state.live && notify(fill(L.labelled, { label: L.flagged }) + `${policyName(event.policy || "")} · ${reasonText(event)}`),
  // The rendered claim is current: a replayed one is old news.
  [EVENT.CLAIM]: (event) => state.live && store.set({ claim: { claimed_by: event.claimed_by, expires_at: event.expires_at } }, "claim"),
  [EVENT.MUTED]: (event) => store.set({ muted: event.muted_policies || [] }, "muted"),
  [EVENT.ERROR]: (event) => {
    if (event.edit !== undefined) editSettled(event.edit); // refused: what waited on it goes on
    if (!state.live) return;
    notify(fill(L.labelled, { label: L.error }) + event.message, true);
    // A failure follows its status: the decided panel gives the reason the page was not given.
    if (state.status === STATUS.FAILED && event.edit === undefined) store.set({ error: event.message }, "decision");
  },
};

// The pause was shown at once; what was read of it after fills the panel as it arrives.
function pauseDetail(event) {
  if (foldPauseDetail(state, event)) store.changed("pause");
}

// The text it was applied to goes with the news: what the page holds on to of the text (a
// selection, a word's menu) is carried through it (tracked-spans.js).
function applyEdit(event) {
  state.drawn = true;
  const before = textOf(state.tokens);
  foldEdit(state, event);
  if (state.pause) store.changed("pause");
  store.changed("edited", { event, before });
  store.changed("tokens", "full");
  editSettled(event.edit); // a command held back for it goes now (commands.js)
}

export function apply(event) {
  handlers[event.type]?.(event);
  if (event.type !== EVENT.TOKEN && state.live) refreshTimelineSoon();
}

// The replay is complete: the rendered status, now with the open pause and the tokens.
export function caughtUp() {
  store.set({ live: true });
  setStatus(state.status);
  store.changed("live");
}
