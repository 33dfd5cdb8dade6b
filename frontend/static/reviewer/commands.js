// Sending reviewer commands: each waits in the outbox (outbox.js) until its ack or error,
// and the page lists those still waiting (#pending). One that the server runs only once every
// edit is applied waits, while an edit is on its way to the worker, for that edit's `edited`
// or `truncated` event (or its error), and goes then: a click right after an edit is never
// refused for it, nor lost.
import { $, data, fill, L } from "./page.js";
import { textOf } from "./fold.js";
import { notify } from "./notice.js";
import { send } from "./socket.js";
import { AFTER_EDITS, messageBytes, QUEUES_EDIT, refusedForAnEdit, refusedOnAnotherText } from "./outbox.js";
import { store } from "./store.js";

const RETRY_UNAVAILABLE_MS = 2000;
const SHOW_SENT_AFTER_MS = 400; // an answer usually comes sooner: no flicker for every click
// An edit acked but not heard of since: after this long the server is asked all the same
// (it refuses while the edit is still unapplied, and that refusal is tried again).
const EDIT_HEARD_WITHIN_MS = 30_000;
const RETRY_REFUSED_MS = 2000; // "…still being applied; retry shortly", for an edit not ours
const MAX_REFUSALS = 60; // two minutes of it: the refusal is shown
const MAX_REREADS = 3; // of a command refused as made on another text
// The change behind such a refusal reaches the page as an event, maybe after the refusal:
// the command waits that long for the text to change before it reads it again all the same.
const TEXT_CHANGE_WITHIN_MS = 3000;
const CHECK_HELD_MS = 1000;
let pendingTimer = null;
let heldTimer = null;

const outbox = () => store.state.outbox;
const unapplied = new Map(); // edit id -> when its ack came: queued for the worker
const settled = new Set(); // edit ids whose event (applied or refused) came
const whenSettled = new Map(); // edit id -> [resolve]

// `prepare()`, where given, is called just before the command goes out (first, and again after
// a refusal that ran nothing) and returns the arguments to send then (what it acts on, read
// from the text as it is by then), or throws to refuse it: its error is the command's.
export function command(name, args, prepare = null) {
  const commandId = `ui-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  return new Promise((resolve, reject) => {
    if (store.state.gone) {
      reject(new Error(L.closed));
      return;
    }
    const message = { command: name, command_id: commandId, ...(args || {}) };
    const size = messageBytes(message);
    if (size > data.maxMessageBytes) {
      // Refused here: the socket would close on it, and the outbox resend it on every reconnect.
      const kB = (bytes) => Math.ceil(bytes / 1024).toLocaleString();
      reject(new Error(fill(L.too_large, { size: kB(size), limit: kB(data.maxMessageBytes) })));
      return;
    }
    const entry = outbox().add(message, resolve, reject);
    entry.prepare = entry.prepareAgain = prepare;
    go(entry); // or later, when the socket is back or the edit before it is applied
    renderPending();
  });
}

const socketOpen = () => store.state.socket?.readyState === WebSocket.OPEN;

// The entry goes now, or is held while an edit is on its way; false when it cannot go (held,
// or no socket: it goes again with the next flush).
function go(entry) {
  const now = Date.now();
  if (entry.refusedOn !== undefined && entry.refusedOn !== textOf(store.state.tokens)) {
    entry.refusedOn = undefined; // the change it was refused for has come: it may go
    entry.retryAt = 0;
  }
  for (const [id, since] of unapplied) if (now - since > EDIT_HEARD_WITHIN_MS) unapplied.delete(id);
  if (outbox().mustWait(entry, unapplied.size, now)) {
    if (!entry.held) entry.since = now;
    entry.held = true;
    entry.sent = false;
    watchHeld();
    return false;
  }
  entry.held = false;
  if (entry.prepare && socketOpen()) {
    try {
      Object.assign(entry.message, entry.prepare());
      entry.preparedOn = textOf(store.state.tokens); // the text it was made on
    } catch (error) {
      outbox().take(entry.message.command_id);
      entry.reject(error);
      return false;
    }
    entry.prepare = null;
  }
  entry.sent = send(entry.message);
  entry.since = now;
  return entry.sent;
}

// A held command goes once nothing it waits for is left.
function releaseHeld() {
  for (const entry of outbox().held()) go(entry);
  renderPending();
}

function watchHeld() {
  if (heldTimer) return;
  heldTimer = setInterval(() => {
    if (!outbox().held().length) {
      clearInterval(heldTimer);
      heldTimer = null;
      return;
    }
    releaseHeld(); // a refusal's wait over, or an edit never heard of
  }, CHECK_HELD_MS);
}

// The event of an edit came: applied (`edited`, `truncated`) or refused (`error`).
export function editSettled(id) {
  if (id === undefined || id === null) return;
  settled.add(id);
  unapplied.delete(id);
  for (const resolve of whenSettled.get(id) || []) resolve();
  whenSettled.delete(id);
  if (!outbox().size) return;
  for (const entry of outbox().held()) entry.retryAt = 0; // the edit a refusal named may be this one
  releaseHeld();
}

// Resolves once edit `id` (an ack's `result.edit`) is applied or refused.
export function editApplied(id) {
  if (id === undefined || id === null || settled.has(id)) return Promise.resolve();
  return new Promise((resolve) => whenSettled.set(id, [...(whenSettled.get(id) || []), resolve]));
}

export const waitingFor = (...names) => outbox().waitingFor(...names);

// A command refused as made on another text goes as soon as the text changes.
export function bindCommands() {
  store.subscribe("tokens", () => {
    if (outbox().held().some((entry) => entry.refusedOn !== undefined)) releaseHeld();
  });
}

// Whatever is still unanswered goes again, oldest first, under its first command_id: one
// that reached the server before the drop is answered from the server's receipt, not rerun.
export function flush() {
  for (const entry of outbox().unsent()) go(entry);
  releaseHeld();
}

export function dropped() {
  outbox().markUnsent();
  renderPending();
}

export function failAll(reason) {
  for (const { reject } of outbox().clear()) reject(new Error(reason));
  renderPending();
}

// What a previous page of this session left unanswered: an error is shown, an ack shows
// in the events.
export function restore() {
  outbox().restore((error) => notify(error.message, true));
  renderPending();
}

export function reply(message) {
  const waiting = outbox().get(message.command_id);
  if (!waiting) {
    if (message.type === "error") notify(message.message, true);
    return;
  }
  if (message.type === "error" && message.status === 503) {
    retryLater(waiting); // refused while Redis was out of reach: nothing changed, so again
    return;
  }
  if (stillApplying(waiting, message)) {
    // An edit this page did not know of (another tab's, or one from before a reload) is on
    // its way: the command waits for it, as for one of this page's own.
    waiting.refusals += 1;
    waiting.retryAt = Date.now() + RETRY_REFUSED_MS;
    waiting.prepare = waiting.prepareAgain; // refused, so not run: read the text again then
    go(waiting);
    renderPending();
    return;
  }
  if (readAgain(waiting, message)) {
    // Made on a text the page had not caught up with (another tab's edit): read again from
    // the text once its change has come, or refused there if its words are gone.
    waiting.rereads += 1;
    waiting.prepare = waiting.prepareAgain;
    waiting.refusedOn = waiting.preparedOn; // goes at once if the change came meanwhile
    waiting.retryAt = Date.now() + TEXT_CHANGE_WITHIN_MS;
    go(waiting);
    renderPending();
    return;
  }
  outbox().take(message.command_id);
  const edit = message.type === "ack" && QUEUES_EDIT.includes(waiting.message.command) ? message.result?.edit : undefined;
  if (edit !== undefined && edit !== null && !settled.has(edit)) unapplied.set(edit, Date.now());
  if (message.type === "ack") waiting.resolve(message.result);
  else waiting.reject(new Error(message.message));
  releaseHeld(); // an edit before them answered: those after it may go, or wait for its event
}

const readAgain = (entry, message) => refusedOnAnotherText(message) && entry.prepareAgain && entry.rereads < MAX_REREADS;

// The refusal of a command while an edit is still on its way, tried again a while.
const stillApplying = (entry, message) =>
  refusedForAnEdit(message) && AFTER_EDITS.includes(entry.message.command) && entry.refusals < MAX_REFUSALS;

function retryLater(entry) {
  entry.sent = false; // shown as waiting, and sent again on a reconnect in the meantime
  entry.since = Date.now();
  renderPending();
  setTimeout(() => {
    if (entry.sent || entry.held || !outbox().has(entry)) return;
    go(entry);
    renderPending();
  }, RETRY_UNAVAILABLE_MS);
}

function renderPending() {
  outbox().save();
  const list = $("pending");
  const { items, later } = outbox().shown(Date.now(), SHOW_SENT_AFTER_MS);
  list.replaceChildren(...items.map(pendingItem));
  list.hidden = !list.childElementCount;
  clearTimeout(pendingTimer);
  if (later !== null) pendingTimer = setTimeout(renderPending, later + 10);
}

function pendingItem({ commandId, command: name, state }) {
  const item = document.createElement("li");
  item.dataset.commandId = commandId;
  item.dataset.command = name;
  item.dataset.state = state;
  const label = (data.commandLabels || {})[name] || name;
  // A held command waits for the server too (for the edit before it to be applied).
  item.textContent = (state === "queued" ? L.commandQueued : L.commandSent).replace("%(command)s", label);
  return item;
}
