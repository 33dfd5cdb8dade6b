// Tracked changes in the text: what each reviewer's edit inserted (<ins>) and deleted (<del>),
// character by character, from the server's redline (GET /api/sessions/<id>/redline?format=json,
// reviewer/documents/redline.py) so the page and the exported redline say the same: drawn after each
// drawing of the text, fetched again after an edit.
import { toUnits } from "./fold.js";
import { $, data } from "./page.js";
import { store } from "./store.js";

let changes = [];

function refresh() {
  fetch(`${data.redlineUrl}?format=json`, { credentials: "same-origin" })
    .then((response) => (response.ok ? response.json() : { changes: [] }))
    .then((body) => {
      changes = body.changes || [];
      draw();
    })
    .catch(() => {});
}

function draw() {
  const box = $("tokens");
  for (const old of box.querySelectorAll("del.redline")) old.remove();
  for (const mark of box.querySelectorAll("ins.redline")) mark.replaceWith(...mark.childNodes);
  box.normalize();
  if (!changes.length) return;
  const tokens = [...box.querySelectorAll(".tok")];
  const text = tokens.map((t) => t.textContent).join("");
  for (const change of changes) {
    const start = toUnits(text, change.start);
    const end = toUnits(text, change.end);
    const title = `${change.author}: ${change.reason}`;
    const first = end > start ? markInsertion(tokens, start, end, title) : null;
    if (change.deleted) placeDeletion(box, tokens, first, start, change.deleted, title);
  }
}

// Deleted text reads just before what replaced it, as in a word processor's redline.
function placeDeletion(box, tokens, before, at, deleted, title) {
  const del = Object.assign(document.createElement("del"), { className: "redline", textContent: deleted, title });
  del.dataset.start = at;
  del.translate = false;
  const next = before || tokens.find((t) => +t.dataset.start >= at);
  if (next) next.before(del);
  else box.appendChild(del);
}

function markInsertion(tokens, start, end, title) {
  let first = null;
  for (const token of tokens) {
    const from = +token.dataset.start;
    const to = from + token.textContent.length;
    if (to <= start || from >= end) continue;
    const node = token.firstChild;
    if (!node || node.nodeType !== Node.TEXT_NODE) continue;
    const a = Math.max(0, start - from);
    const b = Math.min(token.textContent.length, end - from);
    const middle = a > 0 ? node.splitText(a) : node;
    if (b - a < middle.textContent.length) middle.splitText(b - a);
    const ins = Object.assign(document.createElement("ins"), { className: "redline", title });
    middle.replaceWith(ins);
    ins.appendChild(middle);
    first = first || ins;
  }
  return first;
}

export function bindChanges() {
  store.subscribe("drawn", draw);
  store.subscribe("edited", refresh);
}
