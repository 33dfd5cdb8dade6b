// Commands waiting for their answer, by command_id, oldest first. One that could not be
// sent, or whose answer was lost with the connection, is sent again with the same
// command_id, and the server runs a repeated command_id only once. The queue is kept in
// `storage` (the tab's sessionStorage) too: a reload, or a visit elsewhere and back, while a
// command is unanswered sends it again from the new page instead of losing the click.
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
    const entry = { message, resolve, reject, sent: false, since: now };
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
    return [...this.entries.values()].filter((entry) => !entry.sent);
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
      if (entry.sent && waited < showAfter) {
        later = Math.min(later ?? Infinity, showAfter - waited);
        continue;
      }
      items.push({ commandId, command: entry.message.command, state: entry.sent ? "sent" : "queued" });
    }
    return { items, later };
  }
}

// A command's size as the socket sends it (UTF-8 of its JSON). The server's socket closes on a
// message over its limit, and the outbox would send it again after every reconnect.
export const messageBytes = (message) => new TextEncoder().encode(JSON.stringify(message)).length;
