// The session's websocket. Events are applied in sequence order: one seen already (a replay
// overlapping live events) is dropped, a gap asks for a replay from the last one applied.
// A replay sends at most 5000 events: the page asks for the rest if it stops short, and if
// nothing more ever comes it keeps the state the server rendered and goes live. A dropped
// socket reconnects with a backoff and asks only for what it missed.
import { CLOSE } from "./protocol.js";
import { notify } from "./notice.js";
import { $, data, L } from "./page.js";
import { store } from "./store.js";

const SYNC = "sync"; // the consumer's own request for a replay (reviewer/web/consumers.py)
let hooks = {}; // opened(), event(event), reply(message), dropped(), gone(), caughtUp()
let replayTimer = null;
let replayStalls = 0;

export function connect(pageHooks) {
  hooks = pageHooks || hooks;
  const state = store.state;
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const socket = new WebSocket(`${scheme}://${location.host}/ws/sessions/${data.session}/?after=${state.lastSeq}`);
  state.socket = socket;
  setConnection(state.retries ? "reconnecting" : "connecting");
  socket.onopen = () => {
    state.retries = 0;
    state.syncing = false;
    setConnection("connected");
    if (!state.live) watchReplay();
    hooks.opened();
  };
  socket.onmessage = (message) => receive(JSON.parse(message.data));
  socket.onclose = (event) => closed(socket, event);
}

function closed(socket, event) {
  const state = store.state;
  if (socket !== state.socket) return;
  hooks.dropped(); // an answer may be lost with it
  if (event.code === CLOSE.UNAUTHENTICATED || event.code === CLOSE.NOT_FOUND) {
    state.gone = true;
    setConnection("closed");
    hooks.gone();
    if (event.code === CLOSE.UNAUTHENTICATED) notify(L.loggedOut, true); // not a network fault
    return;
  }
  state.retries += 1;
  setConnection("reconnecting");
  // Back off so a server restart is not hammered.
  setTimeout(connect, Math.min(5000, 300 * 2 ** Math.min(state.retries, 5)));
}

function setConnection(name) {
  const badge = $("connection");
  badge.dataset.state = name;
  badge.textContent = L[name];
}

export function send(message) {
  const socket = store.state.socket;
  if (!socket || socket.readyState !== WebSocket.OPEN) return false;
  socket.send(JSON.stringify(message));
  return true;
}

// For scripted checks: a connection lost as a network would lose it.
export const drop = () => store.state.socket && store.state.socket.close();

function receive(message) {
  const state = store.state;
  if (typeof message.seq !== "number") {
    hooks.reply(message);
    return;
  }
  if (message.seq <= state.lastSeq) return;
  if (message.seq > state.lastSeq + 1) {
    requestSync();
    return; // it comes again, in order, with the replay
  }
  state.lastSeq = message.seq;
  state.syncing = false;
  hooks.event(message);
  if (!state.live) {
    if (state.lastSeq >= data.lastSeq) caughtUp();
    else watchReplay();
  }
}

// The replay of what came before the page is drawn once, when it has all arrived.
function caughtUp() {
  clearTimeout(replayTimer);
  hooks.caughtUp();
}

function watchReplay() {
  const state = store.state;
  const seen = state.lastSeq;
  clearTimeout(replayTimer);
  replayTimer = setTimeout(() => {
    if (state.live) return;
    replayStalls = state.lastSeq === seen ? replayStalls + 1 : 0;
    if (replayStalls >= 3) {
      caughtUp();
      return;
    }
    state.syncing = false;
    requestSync();
    watchReplay();
  }, 2000);
}

function requestSync() {
  const state = store.state;
  if (state.syncing) return;
  state.syncing = true;
  send({ command: SYNC, after: state.lastSeq });
  setTimeout(() => (state.syncing = false), 3000); // ask again if the replay got lost
}
