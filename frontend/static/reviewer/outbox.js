// Commands waiting for their answer, by command_id, oldest first. One that could not be
// sent, or whose answer was lost with the connection, is sent again with the same
// command_id, and the server runs a repeated command_id only once. The queue is kept in
// `storage` (the tab's sessionStorage) too: a reload, or a visit elsewhere and back, while a
// command is unanswered sends it again from the new page instead of losing the click.
//
// The server refuses a command whose offsets or alternatives refer to the text while an edit
// is still on its way to the worker (409, "…still being applied; retry shortly"). Such a
// command is held here (`held`) instead, until the edits before it are applied, and sent then.
// One made on a text the server no longer has (409, code text_changed) is read again from the
// text as the page has it by then, where its words still are, and goes again.

import { ERROR_CODE } from "./protocol.js";

// The commands whose answer names an edit queued for the worker (`result.edit`).
export const QUEUES_EDIT = Object.freeze(["edit", "choose", "rollback"]);
// The commands the server runs only once every edit is applied (transitions.require_applied_edits).
export const AFTER_EDITS = Object.freeze(["approve", "reject", "choose", "edit", "rollback", "attention"]);

export class Outbox {
  constructor(storage, key) {
    this.storage = storage;
    this.key = key;
    this.entries = new Map(); // command_id -> {message, resolve, reject, sent, since}
  }

  get size() {
    return this.entries.size;
  }

  values() {
    return this.entries.values();
  }

  get(commandId) {
    return this.entries.get(commandId);
  }

  add(message, resolve, reject, now = Date.now()) {
    // held: kept back until the edits before it are applied; retryAt: not before then (a
    // refusal for an edit this page did not know of); refusals: how many such refusals;
    // rereads: how often it was refused as made on another text and read again.
    const entry = { message, resolve, reject, sent: false, since: now, held: false, retryAt: 0, refusals: 0, rereads: 0 };
    this.entries.set(message.command_id, entry);
    return entry;
  }

  // The entry answered: out of the queue.
  take(commandId) {
    const entry = this.entries.get(commandId);
    this.entries.delete(commandId);
    return entry;
  }

  has(entry) {
    return this.entries.get(entry.message.command_id) === entry;
  }

  clear() {
    const entries = [...this.entries.values()];
    this.entries.clear();
    return entries;
  }

  waitingFor(...names) {
    return [...this.entries.values()].some((entry) => names.includes(entry.message.command));
  }

  // Nothing sent is sure to have arrived: every entry goes again.
  markUnsent() {
    for (const entry of this.entries.values()) entry.sent = false;
  }

  unsent() {
    return [...this.entries.values()].filter((entry) => !entry.sent && !entry.held);
  }

  // Whether `entry` must wait before it goes: it is run only once every edit is applied, and
  // `unapplied` edits are known to be on their way, a command before it in the queue will
  // queue one, or a refusal said to try again later.
  mustWait(entry, unapplied, now = Date.now()) {
    if (!AFTER_EDITS.includes(entry.message.command)) return false;
    if (unapplied > 0 || entry.retryAt > now) return true;
    for (const other of this.entries.values()) {
      if (other === entry) return false;
      if (QUEUES_EDIT.includes(other.message.command)) return true;
    }
    return false;
  }

  held() {
    return [...this.entries.values()].filter((entry) => entry.held);
  }

  save() {
    try {
      const messages = [...this.entries.values()].map((entry) => entry.message);
      if (messages.length) this.storage.setItem(this.key, JSON.stringify(messages));
      else this.storage.removeItem(this.key);
    } catch {
      // storage turned off or full: the commands are still kept while this page is open
    }
  }

  // The commands a previous page left unanswered; nobody here waits for their answer.
  restore(reject, now = Date.now()) {
    let messages = [];
    try {
      messages = JSON.parse(this.storage.getItem(this.key) || "[]");
    } catch {
      return;
    }
    if (!Array.isArray(messages)) return;
    for (const message of messages) {
      if (!message || typeof message.command_id !== "string" || typeof message.command !== "string") continue;
      this.add(message, () => {}, reject, now);
    }
  }

  // What the pending list shows: sent commands only once they waited `showAfter` ms (an
  // answer usually comes sooner); `later`: when to look again, or null.
  shown(now, showAfter) {
    const items = [];
    let later = null;
    for (const [commandId, entry] of this.entries) {
      const waited = now - entry.since;
      const going = entry.sent || entry.held; // on its way, as far as the reviewer can tell
      if (going && waited < showAfter) {
        later = Math.min(later ?? Infinity, showAfter - waited);
        continue;
      }
      const state = entry.held ? "held" : entry.sent ? "sent" : "queued";
      items.push({ commandId, command: entry.message.command, state });
    }
    return { items, later };
  }
}

// A command's size as the socket sends it (UTF-8 of its JSON). The server's socket closes on a
// message over its limit, and the outbox would send it again after every reconnect.
export const messageBytes = (message) => new TextEncoder().encode(JSON.stringify(message)).length;

// The server's refusal of a command while an edit is still on its way to the worker
// (EditPending in reviewer/lifecycle/transitions.py): known by its code, whatever the language.
export const refusedForAnEdit = (message) => message.type === "error" && message.status === 409 && message.code === ERROR_CODE.EDIT_PENDING;

// The refusal of a command made on another text than the session's (TextChanged): the page
// had not heard of a change yet, as after a reconnect, whose replay comes after it went.
export const refusedOnAnotherText = (message) => message.type === "error" && message.status === 409 && message.code === ERROR_CODE.TEXT_CHANGED;
