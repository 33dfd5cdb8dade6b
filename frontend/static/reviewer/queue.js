// The queue's rows: each is the server's own rendering (reviewer/queue_row.html), read again
// from /queue/items/<id> when the floor says that item changed, so the page and a reload
// always agree. Also the waiting count in the tab's title, the waiting times as they grow,
// and claiming, releasing and reassigning through the HTTP API.
import { $, data, fill, L } from "./page.js";

const body = () => document.querySelector("#queue tbody");
const urlFor = (template, id) => template.replace(/\/0(\/|$)/, `/${id}$1`);
let waitingCount = data.waitingCount;

export const rowOf = (id) => document.getElementById(`queue-row-${id}`);

export function showCount(count) {
  waitingCount = count;
  document.title = `${count ? `(${count}) ` : ""}${L.title} · Caesura`;
  $("waiting-count").textContent = String(count);
}

export const currentCount = () => waitingCount;

export function notice(text) {
  const box = $("queue-notice");
  box.textContent = text;
  box.hidden = !text;
}

function parseRow(html) {
  const template = document.createElement("template");
  template.innerHTML = html.trim();
  return template.content.firstElementChild;
}

// A new item belongs on this page only where a reload would show it: the first page, and the
// status filter (if any) lets it through.
function belongsHere(item) {
  const query = new URLSearchParams(location.search);
  const page = query.get("page");
  const status = query.get("status");
  return (!page || page === "1") && (!status || status === item.status);
}

// Read one item again and put its row in place; null when the viewer may no longer see it.
export async function refreshItem(id) {
  const answer = await fetch(urlFor(data.itemUrl, id), { headers: { Accept: "application/json" } });
  const existing = rowOf(id);
  if (answer.status === 404) {
    existing?.remove();
    return null;
  }
  if (!answer.ok) return null;
  const item = await answer.json();
  const row = parseRow(item.row);
  if (existing) existing.replaceWith(row);
  else if (item.waiting && belongsHere(item)) {
    body().prepend(row);
    $("queue").hidden = false;
    $("queue-empty")?.remove();
  }
  showCount(item.waiting_count);
  tick();
  return item;
}

// Every row again, after the socket was away: messages lost meanwhile are not replayed.
export async function refreshAll() {
  const answer = await fetch(location.href, { headers: { Accept: "text/html" } });
  if (!answer.ok) return;
  const page = new DOMParser().parseFromString(await answer.text(), "text/html");
  const fresh = page.querySelector("#queue tbody");
  if (fresh) body().replaceChildren(...fresh.children);
  const count = JSON.parse(page.getElementById("page-data").textContent).waitingCount;
  showCount(count);
  tick();
}

function waitedText(seconds) {
  const minutes = Math.floor(seconds / 60);
  if (minutes < 1) return L.under;
  if (minutes < 60) return fill(L.minutes, { minutes });
  return fill(L.hours, { hours: Math.floor(minutes / 60), minutes: minutes % 60 });
}

// The waiting times grow, and an item crosses its domain's SLA while the page is open.
export function tick() {
  const now = Date.now();
  for (const row of document.querySelectorAll("#queue tr[data-since]")) {
    const since = Date.parse(row.dataset.since);
    const waited = row.querySelector(".waited-for");
    if (waited) waited.textContent = waitedText((now - since) / 1000);
    if (row.dataset.slaAt && Date.parse(row.dataset.slaAt) <= now) {
      row.classList.add("past-sla");
      const sla = row.querySelector(".sla");
      if (sla) sla.hidden = false;
    }
  }
}

async function post(id, command, args) {
  let answer;
  try {
    answer = await fetch(urlFor(data.claimUrl.replace(/claim$/, command), id), {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-CSRFToken": data.csrf },
      body: JSON.stringify(args || {}),
    });
  } catch {
    notice(L.unreachable); // never a click that just stops: the row's button comes back
    await refreshItem(id).catch(() => {});
    return false;
  }
  const result = await answer.json().catch(() => ({}));
  if (!answer.ok) notice(result.error || fill(L.refused, { status: answer.status }));
  await refreshItem(id).catch(() => {});
  return answer.ok;
}

export async function claim(id) {
  if (await post(id, "claim")) notice(fill(L.claimed, { id }));
}

export async function release(id) {
  if (await post(id, "release")) notice(fill(L.released, { id }));
}

export async function reassign(id, reviewer) {
  if (await post(id, "reassign", { reviewer })) notice(fill(L.claimedBy, { id, reviewer }));
}
