// The outbox: unanswered commands by command_id, kept in the tab's storage across reloads.
import assert from "node:assert/strict";
import { test } from "node:test";

import { messageBytes, Outbox, refusedForAnEdit, refusedOnAnotherText } from "../static/reviewer/outbox.js";

function memoryStorage() {
  const items = new Map();
  return {
    getItem: (key) => (items.has(key) ? items.get(key) : null),
    setItem: (key, value) => items.set(key, String(value)),
    removeItem: (key) => items.delete(key),
  };
}

const message = (command, id) => ({ command, command_id: id });

test("an answered command leaves the queue and the storage", () => {
  const storage = memoryStorage();
  const outbox = new Outbox(storage, "k");
  outbox.add(message("pause", "a"), () => {}, () => {});
  outbox.save();
  assert.equal(JSON.parse(storage.getItem("k")).length, 1);
  outbox.take("a");
  outbox.save();
  assert.equal(outbox.size, 0);
  assert.equal(storage.getItem("k"), null);
});

test("a new page sends again what the last one left unanswered, under the same command_id", () => {
  const storage = memoryStorage();
  const before = new Outbox(storage, "k");
  before.add(message("approve", "a"), () => {}, () => {});
  before.save();
  const after = new Outbox(storage, "k");
  after.restore(() => {});
  assert.deepEqual(after.unsent().map((entry) => entry.message), [message("approve", "a")]);
});

test("it ignores what is not a command in its storage", () => {
  const storage = memoryStorage();
  storage.setItem("k", JSON.stringify([null, { command: "pause" }, message("resume", "b")]));
  const outbox = new Outbox(storage, "k");
  outbox.restore(() => {});
  assert.deepEqual([...outbox.values()].map((entry) => entry.message.command_id), ["b"]);
  storage.setItem("k", "not json");
  new Outbox(storage, "k").restore(() => {});
});

test("a dropped connection makes every entry unsent; it knows what it waits for", () => {
  const outbox = new Outbox(memoryStorage(), "k");
  const entry = outbox.add(message("resume", "a"), () => {}, () => {});
  entry.sent = true;
  outbox.markUnsent();
  assert.equal(outbox.unsent().length, 1);
  assert.equal(outbox.waitingFor("pause", "resume"), true);
  assert.equal(outbox.waitingFor("approve"), false);
});

test("a sent command shows in the list only once it has waited a moment", () => {
  const outbox = new Outbox(memoryStorage(), "k");
  const sent = outbox.add(message("pause", "a"), () => {}, () => {}, 1000);
  sent.sent = true;
  outbox.add(message("edit", "b"), () => {}, () => {}, 1000);
  assert.deepEqual(outbox.shown(1100, 400), { items: [{ commandId: "b", command: "edit", state: "queued" }], later: 300 });
  assert.equal(outbox.shown(1500, 400).items.length, 2);
});

test("storage that refuses writes loses nothing while the page is open", () => {
  const outbox = new Outbox({ setItem: () => { throw new Error("full"); }, removeItem: () => {} }, "k");
  outbox.add(message("pause", "a"), () => {}, () => {});
  outbox.save();
  assert.equal(outbox.size, 1);
});

test("a command's size is the UTF-8 of its JSON, as the socket sends it", () => {
  const ascii = messageBytes(message("edit", "a"));
  assert.equal(ascii, JSON.stringify(message("edit", "a")).length);
  // Three bytes a character: the limit counts bytes, not characters.
  assert.equal(messageBytes({ ...message("edit", "a"), text: "病历" }) - messageBytes({ ...message("edit", "a"), text: "" }), 6);
});

test("a decision waits while an edit is on its way, and goes once it is applied", () => {
  const outbox = new Outbox(memoryStorage(), "k");
  const approve = outbox.add(message("approve", "a"), () => {}, () => {});
  assert.equal(outbox.mustWait(approve, 1), true); // an edit acked, its event still to come
  assert.equal(outbox.mustWait(approve, 0), false);
  const pause = outbox.add(message("pause", "p"), () => {}, () => {});
  assert.equal(outbox.mustWait(pause, 1), false); // the server runs a pause at any time
});

test("a command after an edit not yet answered waits for it; one before it does not", () => {
  const outbox = new Outbox(memoryStorage(), "k");
  const choose = outbox.add(message("choose", "c"), () => {}, () => {});
  const edit = outbox.add(message("edit", "e"), () => {}, () => {});
  const approve = outbox.add(message("approve", "a"), () => {}, () => {});
  assert.equal(outbox.mustWait(choose, 0), false);
  assert.equal(outbox.mustWait(edit, 0), true); // the choice before it queues an edit too
  assert.equal(outbox.mustWait(approve, 0), true);
  outbox.take("c");
  outbox.take("e");
  assert.equal(outbox.mustWait(approve, 0), false);
});

test("a command refused while another's edit was applied waits until it may try again", () => {
  const outbox = new Outbox(memoryStorage(), "k");
  const approve = outbox.add(message("approve", "a"), () => {}, () => {});
  approve.retryAt = 3000;
  assert.equal(outbox.mustWait(approve, 0, 2000), true);
  assert.equal(outbox.mustWait(approve, 0, 3001), false);
});

test("a held command is not sent on a reconnect, and shows as on its way", () => {
  const outbox = new Outbox(memoryStorage(), "k");
  const held = outbox.add(message("approve", "a"), () => {}, () => {}, 1000);
  held.held = true;
  outbox.add(message("pause", "b"), () => {}, () => {}, 1000);
  outbox.markUnsent();
  assert.deepEqual(outbox.unsent().map((entry) => entry.message.command_id), ["b"]);
  assert.deepEqual(outbox.held(), [held]);
  assert.equal(outbox.waitingFor("approve"), true); // its button stays greyed
  // Like a sent one, it shows after a moment (an edit is usually applied sooner).
  assert.deepEqual(outbox.shown(1100, 400).items.map((item) => item.commandId), ["b"]);
  assert.deepEqual(outbox.shown(1500, 400).items[0], { commandId: "a", command: "approve", state: "held" });
});

test("it knows the refusal for an edit on its way by its code, whatever the language", () => {
  const refusal = { type: "error", status: 409, code: "edit_pending", message: "较早的编辑仍在应用中，暂时无法批准该会话；请稍后重试" };
  assert.equal(refusedForAnEdit(refusal), true);
  assert.equal(refusedForAnEdit({ ...refusal, code: "text_changed" }), false); // redone by the reviewer, not retried
  assert.equal(refusedForAnEdit({ ...refusal, code: undefined }), false);
  assert.equal(refusedForAnEdit({ ...refusal, status: 400 }), false);
  assert.equal(refusedForAnEdit({ ...refusal, type: "ack" }), false);
});

test("it knows the refusal of a command made on another text by its code", () => {
  const refusal = { type: "error", status: 409, code: "text_changed", message: "The text changed since this command was made" };
  assert.equal(refusedOnAnotherText(refusal), true);
  assert.equal(refusedOnAnotherText({ ...refusal, code: "edit_pending" }), false);
  assert.equal(refusedOnAnotherText({ ...refusal, status: 400 }), false);
  assert.equal(new Outbox(null, "k").add({ command_id: "a", command: "edit" }).rereads, 0);
});
