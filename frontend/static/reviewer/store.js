// The page's state, in one place. The server renders the session's current state (status,
// text, decision); the events up to `data.lastSeq` happened before that, so replaying them
// only rebuilds the tokens, heatmaps and open pause, never an old status. Modules read
// `store.state`, change it here (`set`, or the fold's in-place updates followed by
// `changed`) and draw on the topics they subscribe to:
//   tokens (detail: "append" | "full"), drawn (the text was drawn), edited (an edit landed),
//   pause, heads (another layer's heads at the pause), status, live (the replay is
//   complete), muted, decision, claim.
import { STATUS } from "./protocol.js";
import { Outbox } from "./outbox.js";
import { data } from "./page.js";

function initialState() {
  return {
    status: data.status,
    decisionComment: data.decisionComment || "",
    decision: data.decision, // {actor, time} of the approval, rejection or cancel
    error: data.error || "", // why a failed session failed, in the page's language
    lastSeq: 0,
    live: !(data.lastSeq > 0), // false while replaying what happened before the page was rendered
    drawn: false, // tokens came from events; until then #tokens holds the server-rendered text
    tokens: [], // tokens[position] = {text, probability, entropy, alternatives, edited}
    ids: [], // ids[position]: the token id there
    liveRows: [], // liveRows[position] = attention of that token over its context
    pause: null, // the open pause: the `pause` event, kept current by later edits
    muted: null, // the policies muted since the page was rendered (null: the rendered ones)
    socket: null,
    retries: 0,
    syncing: false,
    gone: false, // the server refused the socket for good (logged out, not found)
    outbox: new Outbox(globalThis.sessionStorage, `caesura-outbox-${data.session}`),
    selection: null, // {start, end, text} of a text selection being edited
    menuPosition: null,
    pausePositions: [], // where the session paused, for moving between pauses
    claim: null, // {claimed_by, expires_at} of a generation from an application (claim.js)
  };
}

export function createStore(state) {
  const listeners = new Map(); // topic -> [listener]
  const changed = (topic, detail) => {
    for (const listener of listeners.get(topic) || []) listener(detail);
  };
  return {
    state,
    subscribe(topic, listener) {
      if (!listeners.has(topic)) listeners.set(topic, []);
      listeners.get(topic).push(listener);
    },
    changed,
    set(patch, topic, detail) {
      Object.assign(state, patch);
      if (topic) changed(topic, detail);
    },
  };
}

export const store = createStore(initialState());

// Whether the text takes a correction now: at a pause, or generated and awaiting its decision
// (an edit or a rollback then reopens it as a pause at its end).
const EDITABLE = new Set([STATUS.PAUSED, STATUS.GENERATED]);
export const editable = (status = store.state.status) => EDITABLE.has(status);

// The open pause, while it is shown: paused, and the replay complete.
export const shownPause = () => (store.state.status === STATUS.PAUSED && store.state.live ? store.state.pause : null);

// A new status; only a paused session has an open pause.
export function setStatus(status) {
  store.set(status === STATUS.PAUSED ? { status } : { status, pause: null }, "status", status);
}
