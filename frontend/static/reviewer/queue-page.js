// The queue page's entry point, loaded by reviewer/session_list.html as a module: the rows
// follow the floor live (queue-socket.js, queue.js), `c` claims, and a new pause in one's
// domains is announced on the page and, once the reviewer allowed it with the button, as a
// browser notification. It writes nothing to `window`.
import { STATUS_GROUP } from "./protocol.js";
import { $, fill, L } from "./page.js";
import { claim, currentCount, notice, reassign, refreshAll, refreshItem, release, rowOf, showCount, tick } from "./queue.js";
import { connectQueue } from "./queue-socket.js";

const TICK_MS = 30_000;

function isNewPause(message) {
  return message.action === "status" && STATUS_GROUP.WAITING.includes(message.status) && !message.claimed_by;
}

async function onMessage(message) {
  const fresh = !rowOf(message.session) || rowOf(message.session).dataset.waiting !== "1";
  const item = await refreshItem(message.session);
  if (!item || !fresh || !isNewPause(message)) return;
  const text = fill(L.newPause, { domain: item.domain, id: item.id });
  notice(text);
  if ("Notification" in window && Notification.permission === "granted") {
    new Notification("Caesura", { body: text, tag: `caesura-queue-${item.id}` });
  }
}

// Asked only when the reviewer presses the button, never on load.
function bindNotifications() {
  const button = $("notify-on");
  if (!("Notification" in window) || Notification.permission !== "default") return;
  button.hidden = false;
  button.addEventListener("click", async () => {
    const answer = await Notification.requestPermission();
    button.hidden = true;
    notice(answer === "granted" ? L.notifyOn : L.notifyDenied);
  });
}

// `c`: claim the item the keyboard is on, or the first unclaimed one.
function onKey(event) {
  if (event.key !== "c" || event.ctrlKey || event.metaKey || event.altKey) return;
  if (event.target.closest("input, textarea, select, [contenteditable]")) return;
  const here = event.target.closest?.("tr[data-claimable='1']");
  const row = here || document.querySelector("#queue tr[data-claimable='1']");
  event.preventDefault();
  if (row) claim(row.dataset.session);
  else notice(L.nothingToClaim);
}

function onClick(event) {
  const button = event.target.closest("button[data-claim], button[data-release]");
  if (!button) return;
  button.disabled = true;
  const done = button.dataset.claim ? claim(button.dataset.claim) : release(button.dataset.release);
  done.finally(() => (button.disabled = false)); // a row drawn again has a new button anyway
}

function onSubmit(event) {
  const form = event.target.closest("form[data-reassign]");
  if (!form) return;
  event.preventDefault();
  reassign(form.dataset.reassign, form.elements.reviewer.value);
}

showCount(currentCount());
tick();
setInterval(tick, TICK_MS);
bindNotifications();
document.addEventListener("keydown", onKey);
$("queue").addEventListener("click", onClick);
$("queue").addEventListener("submit", onSubmit);
connectQueue({ message: onMessage, reconnected: refreshAll });
