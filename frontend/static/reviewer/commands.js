// Sending reviewer commands: each waits in the outbox (outbox.js) until its ack or error,
// and the page lists those still waiting (#pending).
import { $, data, fill, L } from "./page.js";
import { notify } from "./notice.js";
import { send } from "./socket.js";
import { messageBytes } from "./outbox.js";
import { store } from "./store.js";

const RETRY_UNAVAILABLE_MS = 2000;
const SHOW_SENT_AFTER_MS = 400; // an answer usually comes sooner: no flicker for every click
let pendingTimer = null;

const outbox = () => store.state.outbox;

export function command(name, args) {
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
    entry.sent = send(entry.message); // or later, when the socket is back
    renderPending();
  });
}

export const waitingFor = (...names) => outbox().waitingFor(...names);

// Whatever is still unanswered goes again, oldest first, under its first command_id: one
// that reached the server before the drop is answered from the server's receipt, not rerun.
export function flush() {
  for (const entry of outbox().unsent()) {
    entry.sent = send(entry.message);
    entry.since = Date.now();
  }
  renderPending();
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
  outbox().take(message.command_id);
  renderPending();
  if (message.type === "ack") waiting.resolve(message.result);
  else waiting.reject(new Error(message.message));
}

function retryLater(entry) {
  entry.sent = false; // shown as waiting, and sent again on a reconnect in the meantime
  entry.since = Date.now();
  renderPending();
  setTimeout(() => {
    if (entry.sent || !outbox().has(entry)) return;
    entry.sent = send(entry.message);
    entry.since = Date.now();
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
  item.textContent = (state === "sent" ? L.commandSent : L.commandQueued).replace("%(command)s", label);
  return item;
}
