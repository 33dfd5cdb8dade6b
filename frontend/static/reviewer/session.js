// The session page: a live view of one review session over its websocket.
// The server renders the session's current state (status, text, decision); the events up to
// `data.lastSeq` happened before that, so replaying them only rebuilds the tokens, heatmaps
// and open pause, never an old status. Later events are live.
// Events are applied in sequence order; tokens are keyed by position, so a replay after a
// reconnect never duplicates them, and `edited` / `truncated` events (a reviewer's edit or
// rollback to a position) re-render from the full text they carry; a `rollback` event (the
// engine's, of drifting tokens) cuts the tokens at `removed_from`. The kinds and their fields
// are declared in reviewer/events.py.
// Commands wait in an outbox until their ack or error: one that could not be sent, or whose
// answer was lost with the connection, is sent again with the same command_id on reconnect,
// and the server runs a repeated command_id only once. The outbox is kept in the tab's
// sessionStorage too: a reload, or a visit elsewhere and back, while a command is unanswered
// sends it again from the new page instead of losing the click.
(function () {
  "use strict";

  const data = JSON.parse(document.getElementById("page-data").textContent);
  const L = data.labels;
  const W = window.CaesuraWords;
  const $ = (id) => document.getElementById(id);
  const FINAL = new Set(["completed", "rejected", "cancelled", "failed"]);
  const ENDED = new Set(["completed", "rejected", "cancelled"]); // nothing can run again
  const LANG = document.documentElement.lang || undefined;
  const DATE_TIME = new Intl.DateTimeFormat(LANG, { dateStyle: "medium", timeStyle: "short" });
  const TIME = new Intl.DateTimeFormat(LANG, { hour: "numeric", minute: "2-digit", second: "2-digit" });
  const fill = (template, values) => template.replace(/%\((\w+)\)s/g, (_, key) => String(values[key] ?? ""));

  const state = {
    status: data.status,
    decisionComment: data.decisionComment || "",
    decision: data.decision, // {actor, time} of the approval, rejection or cancel
    lastSeq: 0,
    live: !(data.lastSeq > 0), // false while replaying what happened before the page was rendered
    drawn: false, // tokens came from events; until then #tokens holds the server-rendered text
    tokens: [], // tokens[position] = {text, probability, entropy, alternatives, edited}
    liveRows: [], // liveRows[position] = attention of that token over its context
    pause: null, // the open pause: the `pause` event, kept current by later edits
    socket: null,
    retries: 0,
    syncing: false,
    gone: false, // the server refused the socket for good (logged out, not found)
    outbox: new Map(), // command_id -> {message, resolve, reject, sent, since}
    selection: null, // {start, end} of a text selection being edited
    menuPosition: null,
    pausePositions: [], // where the session paused, for moving between pauses
  };

  // --- the connection ----------------------------------------------------------------------

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const url = `${scheme}://${location.host}/ws/sessions/${data.session}/?after=${state.lastSeq}`;
    const socket = new WebSocket(url);
    state.socket = socket;
    setConnection(state.retries ? "reconnecting" : "connecting");
    socket.onopen = () => {
      state.retries = 0;
      state.syncing = false;
      setConnection("connected");
      if (!state.live) watchReplay();
      flushOutbox();
    };
    socket.onmessage = (message) => receive(JSON.parse(message.data));
    socket.onclose = (event) => closed(socket, event);
  }

  function closed(socket, event) {
    if (socket !== state.socket) return;
    for (const entry of state.outbox.values()) entry.sent = false; // its answer may be lost
    renderOutbox();
    if (event.code === 4401 || event.code === 4404) {
      state.gone = true;
      setConnection("closed");
      failOutbox(L.closed);
      return;
    }
    state.retries += 1;
    setConnection("reconnecting");
    // Back off so a server restart is not hammered; reconnecting asks only for what we missed.
    setTimeout(connect, Math.min(5000, 300 * 2 ** Math.min(state.retries, 5)));
  }

  function setConnection(name) {
    const badge = $("connection");
    badge.dataset.state = name;
    badge.textContent = L[name];
  }

  function send(message) {
    if (!state.socket || state.socket.readyState !== WebSocket.OPEN) return false;
    state.socket.send(JSON.stringify(message));
    return true;
  }

  function command(name, args) {
    const commandId = `ui-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
    return new Promise((resolve, reject) => {
      if (state.gone) {
        reject(new Error(L.closed));
        return;
      }
      const message = { command: name, command_id: commandId, ...(args || {}) };
      const entry = { message, resolve, reject, sent: false, since: Date.now() };
      state.outbox.set(commandId, entry);
      entry.sent = send(message); // or later, when the socket is back
      renderOutbox();
    });
  }

  const OUTBOX_KEY = `caesura-outbox-${data.session}`;

  function saveOutbox() {
    try {
      const messages = [...state.outbox.values()].map((entry) => entry.message);
      if (messages.length) sessionStorage.setItem(OUTBOX_KEY, JSON.stringify(messages));
      else sessionStorage.removeItem(OUTBOX_KEY);
    } catch (_) {
      // storage turned off or full: the commands are still kept while this page is open
    }
  }

  function restoreOutbox() {
    let messages = [];
    try {
      messages = JSON.parse(sessionStorage.getItem(OUTBOX_KEY) || "[]");
    } catch (_) {
      return;
    }
    if (!Array.isArray(messages)) return;
    for (const message of messages) {
      if (!message || typeof message.command_id !== "string" || typeof message.command !== "string") continue;
      // Nobody on this page waits for its answer: an error is shown, an ack shows in the events.
      const reject = (error) => notify(error.message, true);
      state.outbox.set(message.command_id, { message, resolve: () => {}, reject, sent: false, since: Date.now() });
    }
    renderOutbox();
  }

  function flushOutbox() {
    // Whatever is still unanswered goes again, oldest first, under its first command_id: one
    // that reached the server before the drop is answered from the server's receipt, not rerun.
    for (const entry of state.outbox.values()) {
      if (!entry.sent) {
        entry.sent = send(entry.message);
        entry.since = Date.now();
      }
    }
    renderOutbox();
  }

  const RETRY_UNAVAILABLE_MS = 2000;

  function retryLater(entry) {
    entry.sent = false; // shown as waiting, and sent again on a reconnect in the meantime
    entry.since = Date.now();
    renderOutbox();
    setTimeout(() => {
      if (entry.sent || state.outbox.get(entry.message.command_id) !== entry) return;
      entry.sent = send(entry.message);
      entry.since = Date.now();
      renderOutbox();
    }, RETRY_UNAVAILABLE_MS);
  }

  function failOutbox(reason) {
    for (const { reject } of state.outbox.values()) reject(new Error(reason));
    state.outbox.clear();
    renderOutbox();
  }

  const SHOW_SENT_AFTER_MS = 400; // an answer usually comes sooner: no flicker for every click
  let outboxTimer = null;

  function renderOutbox() {
    saveOutbox();
    const list = $("pending");
    list.textContent = "";
    const now = Date.now();
    let later = null;
    for (const [commandId, entry] of state.outbox) {
      const waited = now - entry.since;
      if (entry.sent && waited < SHOW_SENT_AFTER_MS) {
        later = Math.min(later ?? Infinity, SHOW_SENT_AFTER_MS - waited);
        continue;
      }
      const name = entry.message.command;
      const item = document.createElement("li");
      item.dataset.commandId = commandId;
      item.dataset.command = name;
      item.dataset.state = entry.sent ? "sent" : "queued";
      item.textContent = (entry.sent ? L.commandSent : L.commandQueued).replace(
        "%(command)s",
        (data.commandLabels || {})[name] || name
      );
      list.appendChild(item);
    }
    list.hidden = !list.childElementCount;
    clearTimeout(outboxTimer);
    if (later !== null) outboxTimer = setTimeout(renderOutbox, later + 10);
  }

  const waitingFor = (...names) =>
    [...state.outbox.values()].some((entry) => names.includes(entry.message.command));

  function receive(message) {
    if (typeof message.seq !== "number") {
      reply(message);
      return;
    }
    if (message.seq <= state.lastSeq) return; // already seen (a replay overlapping live events)
    if (message.seq > state.lastSeq + 1) {
      requestSync();
      return; // it comes again, in order, with the replay
    }
    state.lastSeq = message.seq;
    state.syncing = false;
    apply(message);
    if (!state.live) {
      if (state.lastSeq >= data.lastSeq) caughtUp();
      else watchReplay();
    }
  }

  function reply(message) {
    const waiting = state.outbox.get(message.command_id);
    if (!waiting) {
      if (message.type === "error") notify(message.message, true);
      return;
    }
    if (message.type === "error" && message.status === 503) {
      retryLater(waiting); // refused while Redis was out of reach: nothing changed, so again
      return;
    }
    state.outbox.delete(message.command_id);
    renderOutbox();
    if (message.type === "ack") waiting.resolve(message.result);
    else waiting.reject(new Error(message.message));
  }

  // The replay of what came before the page is drawn once, when it has all arrived.
  function caughtUp() {
    state.live = true;
    clearTimeout(replayTimer);
    setStatus(state.status); // the rendered status, now with the open pause and the tokens
    scheduleLiveHeatmap();
  }

  let replayTimer = null;
  let replayStalls = 0;

  function watchReplay() {
    // A replay sends at most 5000 events: ask for the rest if it stops short. If nothing more
    // ever comes, the page keeps the state the server rendered and goes live.
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
    if (state.syncing) return;
    state.syncing = true;
    send({ command: "sync", after: state.lastSeq });
    setTimeout(() => (state.syncing = false), 3000); // ask again if the replay got lost
  }

  // --- applying events ---------------------------------------------------------------------

  const handlers = {
    token: applyToken,
    pause: applyPause,
    edited: applyEdit,
    truncated: applyEdit,
    attention: applyAttention,
    rollback: applyRollback,
    status: (event) => {
      if (state.live) setStatus(event.status);
      else if (event.status !== "paused") state.pause = null; // an old pause, since closed
    },
    finish: (event) => {
      showStopReason(event.reason);
      if (state.live) notify(L.finished);
    },
    flag: (event) => state.live && notify(`${L.flagged}: ${policyName(event.policy || "")} · ${reasonText(event)}`),
    muted: (event) => {
      state.muted = event.muted_policies || [];
      renderMute(state.status === "paused" && state.live ? state.pause : null);
    },
    error: (event) => state.live && notify(`${L.error}: ${event.message}`, true),
  };

  function apply(event) {
    const handler = handlers[event.type];
    if (handler) handler(event);
    if (event.type !== "token" && state.live) refreshTimelineSoon();
  }

  function applyToken(event) {
    state.drawn = true;
    const position = event.position;
    const appended = position === state.tokens.length;
    state.tokens.length = Math.min(state.tokens.length, position);
    state.tokens[position] = {
      text: event.text,
      probability: event.probability,
      entropy: event.entropy,
      alternatives: event.alternatives || [],
    };
    state.liveRows.length = Math.min(state.liveRows.length, position);
    if (event.attention && event.attention.length) state.liveRows[position] = event.attention;
    scheduleRender(appended ? "append" : "full");
    scheduleLiveHeatmap();
  }

  function applyPause(event) {
    state.pause = event;
    if (!state.pausePositions.includes(event.position)) state.pausePositions.push(event.position);
    if (event.span) event.span = event.span.map((i) => toUnits(event.text ?? textOf(state.tokens), i));
    scheduleRender("full");
    renderPause();
  }

  function applyEdit(event) {
    state.drawn = true;
    let keep = Math.min(event.token_start ?? 0, state.tokens.length);
    let prefix = textOf(state.tokens.slice(0, keep));
    if (!event.text.startsWith(prefix)) {
      keep = 0;
      prefix = "";
    }
    // The worker sends each token from the edit point on; without them (or if they do not
    // add up to the text) one "edited" piece holds the new text.
    const rest = event.text.slice(prefix.length);
    const pieces = Array.isArray(event.tokens) ? event.tokens : [];
    const exact =
      keep === event.token_start &&
      pieces.length === event.token_ids.length - keep &&
      pieces.map((piece) => piece.text).join("") === rest;
    const before = untouchedAfter(event, keep, prefix.length);
    state.tokens.length = keep;
    let offset = prefix.length;
    for (let position = keep; position < event.token_ids.length; position += 1) {
      const piece = exact ? pieces[position - keep] : { text: position === keep ? rest : "" };
      // Only what the reviewer wrote is marked; a piece of the old text keeps its shading.
      const old = exact ? before.get(`${offset}:${piece.text}`) : null;
      state.tokens[position] = old || { text: piece.text, entropy: piece.entropy, edited: true };
      offset += piece.text.length;
    }
    state.liveRows.length = Math.min(state.liveRows.length, keep);
    if (state.pause) updatePauseAfterEdit(event, keep, exact ? pieces : []);
    window.CaesuraChanges.refresh($("tokens"), state);
    scheduleRender("full");
    scheduleLiveHeatmap();
  }

  // The tokens after the edited span, by where they will sit in the new text and their text.
  function untouchedAfter(event, keep, prefixLength) {
    const found = new Map();
    if (event.char_end === undefined) return found;
    const oldText = textOf(state.tokens);
    const end = toUnits(oldText, event.char_end);
    const delta = (event.text_after || "").length - (event.text_before || "").length;
    let offset = prefixLength;
    for (let position = keep; position < state.tokens.length; position += 1) {
      const token = state.tokens[position];
      if (!token) continue;
      if (offset >= end && !token.edited) found.set(`${offset + delta}:${token.text}`, token);
      offset += token.text.length;
    }
    return found;
  }

  function applyRollback(event) {
    state.drawn = true;
    const keep = event.removed_from;
    state.tokens.length = Math.min(state.tokens.length, keep);
    state.liveRows.length = Math.min(state.liveRows.length, keep);
    if (state.live) notify(`${L.rolledBack}: ${reasonText(event.decision)}`);
    scheduleRender("full");
    scheduleLiveHeatmap();
  }

  function updatePauseAfterEdit(event, keep, pieces) {
    const pause = state.pause;
    if (event.alternatives) pause.alternatives = event.alternatives;
    pause.lookahead = event.lookahead || { branches: [] };
    if (event.attention && event.attention.layers) pause.attention = event.attention;
    // The text before the edit point is the same before and after the edit.
    const editStart = event.char_start === undefined ? undefined : toUnits(textOf(state.tokens), event.char_start);
    if (pause.span && editStart !== undefined && editStart < pause.span[1]) {
      pause.span = null; // the matched text was edited away
    }
    if (pause.history) {
      pause.history = {
        probability: [...pause.history.probability.slice(0, keep), ...pieces.map((p) => p.top1 ?? null)],
        entropy: [...pause.history.entropy.slice(0, keep), ...pieces.map((p) => p.entropy ?? null)],
      };
    }
    pause.position = event.token_ids.length;
    pause.edited = true;
    pause.attentionStale = !(event.attention && event.attention.layers);
    renderPause();
  }

  function setStatus(status) {
    state.status = status;
    const badge = $("status");
    badge.textContent = data.statusLabels[status] || status;
    badge.dataset.status = status;
    badge.className = `badge status-${status}`;
    if (status !== "paused") {
      state.pause = null;
      closeEditor();
      hideMenu();
    }
    document.body.dataset.status = status;
    renderControls();
    renderPause();
    scheduleRender("full");
  }

  // --- the text ----------------------------------------------------------------------------

  const textOf = (tokens) => tokens.map((t) => (t ? t.text : "")).join("");
  let renderMode = null;
  let renderedCount = 0;
  let renderedOnce = false;

  function scheduleRender(mode) {
    // The server-rendered text stays until the replay is complete and has drawn tokens: no
    // half-built text shows on the way.
    if (!state.live || !state.drawn) return;
    if (renderMode === "full") return;
    const first = renderMode === null;
    renderMode = mode;
    if (first) requestAnimationFrame(renderTokens);
  }

  // The text is drawn as words (W.groupWords): a reviewer hovers, focuses and rolls back to a
  // word, each one element over its tokens' spans; the spans keep each token's position and
  // offset for the tracked changes and for selecting text.
  let drawnWords = []; // [{first, last}] of the words drawn, in order

  function renderTokens() {
    const box = $("tokens");
    // The first drawing replaces the server-rendered text.
    const full = renderMode === "full" || renderedCount > state.tokens.length || !renderedOnce;
    renderedOnce = true;
    renderMode = null;
    if (full) {
      box.textContent = "";
      drawnWords = [];
    }
    // Follow the newest token, unless the reviewer scrolled up to read.
    const following = box.scrollTop + box.clientHeight >= box.scrollHeight - 8;
    const focused = wordOf(document.activeElement);
    const words = W.groupWords(state.tokens);
    // New tokens change only the last words (one grows, or a piece completes a character):
    // those are drawn again, the words before them stay.
    let kept = 0;
    while (kept < Math.min(words.length, drawnWords.length) && sameWord(words[kept], drawnWords[kept])) kept += 1;
    if (kept < drawnWords.length) removeWordsFrom(box, drawnWords[kept].first);
    let offset = kept < words.length ? textOf(state.tokens.slice(0, words[kept].first)).length : 0;
    const span = state.pause && state.pause.span;
    const fragment = document.createDocumentFragment();
    for (const word of words.slice(kept)) {
      const element = wordElement(word, offset, span);
      offset += element.textContent.length;
      if (element.firstChild) fragment.appendChild(element);
    }
    box.appendChild(fragment);
    drawnWords = words;
    renderedCount = state.tokens.length;
    window.CaesuraChanges.draw(box, state);
    A.refresh();
    if (focused && !box.contains(focused)) box.querySelector(`.word[data-first="${focused.dataset.first}"]`)?.focus({ preventScroll: true });
    if (following) box.scrollTop = box.scrollHeight;
  }

  const sameWord = (a, b) => a.first === b.first && a.last === b.last;

  function removeWordsFrom(box, first) {
    for (const element of box.querySelectorAll(".word")) if (+element.dataset.first >= first) element.remove();
  }

  // A word: shaded as one by its least sure piece; a space or line break is no stop for the keys.
  function wordElement(word, start, span) {
    const element = document.createElement("span");
    element.className = "word";
    element.dataset.first = word.first;
    element.dataset.last = word.last;
    element.dataset.start = start;
    let offset = start;
    let edited = true;
    for (let position = word.first; position <= word.last; position += 1) {
      const token = state.tokens[position];
      if (!token) continue;
      if (token.text) element.appendChild(tokenElement(token, position, offset, span));
      offset += token.text.length;
      edited = edited && Boolean(token.edited);
    }
    const least = leastSure(word);
    if (!element.textContent.trim()) element.classList.add("blank");
    else element.tabIndex = -1; // focusable from the keyboard (arrow keys move between words)
    if (edited) element.classList.add("edited");
    else if (least) element.style.setProperty("--p", least.token.probability.toFixed(3));
    return element;
  }

  // The word's confidence: the probability the model gave the least sure of its pieces (what
  // its shading and its tip show). Null when no piece has one (an edit wrote it).
  function leastSure(word) {
    let least = null;
    for (let position = word.first; position <= word.last; position += 1) {
      const token = state.tokens[position];
      if (!token || typeof token.probability !== "number") continue;
      if (!least || token.probability < least.token.probability) least = { token, position };
    }
    return least;
  }

  function tokenElement(token, position, offset, span) {
    const element = document.createElement("span");
    element.className = token.edited ? "tok edited" : "tok";
    element.textContent = token.text;
    element.dataset.pos = position;
    element.dataset.start = offset;
    if (span && offset < span[1] && offset + token.text.length > span[0]) {
      element.classList.add("match");
    }
    return element;
  }

  // The word a reviewer points at (never a blank one), and what it spans.
  const wordOf = (target) => target?.closest?.("#tokens .word:not(.blank)") || null;
  const wordSpan = (element) => ({ first: +element.dataset.first, last: +element.dataset.last });
  const wordText = (element) => textOf(state.tokens.slice(+element.dataset.first, +element.dataset.last + 1));

  const percent = W.percent;

  const visible = (text) => W.visible(text, L);

  function showTip(element) {
    const word = wordSpan(element);
    if (!state.tokens[word.last]) return;
    const tip = $("tip");
    tip.textContent = "";
    const least = leastSure(word);
    if (!least) {
      tip.appendChild(line(L.edited));
      const entropy = state.tokens[word.first].entropy;
      if (typeof entropy === "number") tip.appendChild(line(`${L.entropy} ${entropy.toFixed(2)}`));
    } else {
      const { token, position } = least;
      const entropy = typeof token.entropy === "number" ? ` · ${L.entropy} ${token.entropy.toFixed(2)}` : "";
      tip.appendChild(line(`${L.probability} ${percent(token.probability)}${entropy}`));
      const pieces = word.last - word.first + 1;
      if (pieces > 1) tip.appendChild(line(fill(L.wordPieces, { count: pieces }), "muted"));
      const looked = A.tipLine(word.first);
      if (looked) tip.appendChild(line(looked));
      tipAlternatives(tip, token.alternatives || [], textOf(state.tokens.slice(0, position)));
    }
    const box = element.getBoundingClientRect();
    tip.hidden = false;
    tip.style.left = `${Math.min(box.left, window.innerWidth - tip.offsetWidth - 8)}px`;
    tip.style.top = `${box.bottom + 6}px`;
  }

  // What else the model weighed at that piece, each as the word it would have made there.
  function tipAlternatives(tip, alternatives, context) {
    if (!alternatives.length) return;
    tip.appendChild(line(L.alternatives, "tip-head"));
    const list = document.createElement("ol");
    for (const alt of alternatives.slice(0, 5)) {
      const item = document.createElement("li");
      const found = W.plainLabel(alt.text, L, false) ? null : W.alternativeWord(context, alt.text);
      item.append(chip(found ? found.word : visible(alt.text)), ` ${percent(alt.prob)}`);
      list.appendChild(item);
    }
    tip.appendChild(list);
  }

  function line(text, className) {
    const element = document.createElement("div");
    element.textContent = text;
    if (className) element.className = className;
    return element;
  }

  function chip(text) {
    const element = document.createElement("code");
    element.className = "chip";
    element.translate = false; // the model's own text
    element.textContent = text;
    return element;
  }

  function hideTip() {
    $("tip").hidden = true;
  }

  // --- a word's menu: roll back ------------------------------------------------------------
  // Rolling back discards text, so a plain click or tap never offers it: the menu opens on an
  // explicit gesture (right-click, a long press, or Enter on a focused word). It removes the
  // word from its first piece on, and everything after it.

  const LONG_PRESS_MS = 550;
  let pressTimer = null;

  function tokenMenuRequested(event) {
    const element = wordOf(event.target);
    if (!element || state.status !== "paused") return;
    event.preventDefault(); // our menu instead of the browser's
    openMenu(element);
  }

  function pressStarted(event) {
    const element = wordOf(event.target);
    clearTimeout(pressTimer);
    if (!element || state.status !== "paused" || event.touches.length !== 1) return;
    pressTimer = setTimeout(() => openMenu(element), LONG_PRESS_MS);
  }

  function pressEnded() {
    clearTimeout(pressTimer);
  }

  function tokenTapped(event) {
    // A tap shows what the model knew about the word (a touch screen has no hover).
    // At a pause, or once written, a click also shows where that word looked.
    const element = wordOf(event.target);
    if (!element) return;
    if (state.status !== "running" && state.live && window.getSelection()?.isCollapsed !== false) {
      A.focusWord(+element.dataset.first);
    }
    if (event.pointerType !== "mouse") showTip(element);
  }

  function openMenu(element) {
    clearTimeout(pressTimer);
    window.getSelection()?.removeAllRanges(); // a long press also selects a word
    closeEditor();
    state.menuPosition = +element.dataset.first;
    const menu = $("token-menu");
    const box = element.getBoundingClientRect();
    menu.hidden = false;
    menu.style.left = `${Math.min(box.left + window.scrollX, window.innerWidth - 260)}px`;
    menu.style.top = `${box.bottom + window.scrollY + 4}px`;
    hideTip();
    $("rollback-here").focus({ preventScroll: true });
  }

  function hideMenu() {
    $("token-menu").hidden = true;
    state.menuPosition = null;
  }

  function rollbackHere() {
    const position = state.menuPosition;
    hideMenu();
    if (position === null) return;
    command("rollback", { position }).catch((error) => notify(error.message, true));
  }

  // The menu's other choice: on a phone a long press is how a word is picked for replacing.
  function replaceHere() {
    const element = $("tokens").querySelector(`.word[data-first="${state.menuPosition}"]`);
    hideMenu();
    if (element) replaceWord(element);
  }

  function replaceWord(element) {
    const start = +element.dataset.start;
    openEditor(start, start + wordText(element).length);
  }

  // --- selecting text: replace it ----------------------------------------------------------

  function offsetIn(node, offset) {
    const box = $("tokens");
    if (node === box || (node.classList && node.classList.contains("word"))) {
      // Between the words (or a word's pieces): where the next one starts.
      const next = node.childNodes[offset];
      if (next && next.dataset && next.dataset.start !== undefined) return +next.dataset.start;
      return node === box ? textOf(state.tokens).length : +node.dataset.start + wordText(node).length;
    }
    const element = (node.nodeType === Node.TEXT_NODE ? node.parentElement : node).closest(".tok");
    if (!element || !box.contains(element)) return null;
    return +element.dataset.start + textBefore(element, node) + (node.nodeType === Node.TEXT_NODE ? offset : 0);
  }

  // The text of `element` before `node` (a token may hold an <ins> mark around part of it).
  function textBefore(element, node) {
    let count = 0;
    const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
    while (walker.nextNode() && walker.currentNode !== node) count += walker.currentNode.textContent.length;
    return node.nodeType === Node.TEXT_NODE ? count : 0;
  }

  function textSelected() {
    if (state.status !== "paused") return;
    const selection = window.getSelection();
    if (!selection || selection.isCollapsed || !selection.rangeCount) return;
    const range = selection.getRangeAt(0);
    const start = offsetIn(range.startContainer, range.startOffset);
    const end = offsetIn(range.endContainer, range.endOffset);
    if (start === null || end === null || end <= start) return;
    hideMenu();
    openEditor(start, end);
  }

  function openEditor(start, end) {
    const text = textOf(state.tokens);
    const selected = text.slice(start, end);
    state.selection = { start, end, text: selected };
    $("edit-selection").textContent = selected;
    $("glossary-filter").value = selected.trim();
    $("edit-text").value = selected;
    $("edit-panel").hidden = false;
    renderGlossary();
    $("edit-panel").scrollIntoView({ block: "nearest" });
  }

  function closeEditor() {
    $("edit-panel").hidden = true;
    state.selection = null;
  }

  function matchingTerms(query) {
    const q = query.trim().toLowerCase();
    if (!q) return data.glossary;
    return data.glossary.filter((t) =>
      [t.term, t.preferred, t.code].some((field) => {
        const value = (field || "").toLowerCase();
        return value && (value.includes(q) || q.includes(value));
      })
    );
  }

  function renderGlossary() {
    let terms = matchingTerms($("glossary-filter").value);
    const note = $("glossary-note");
    note.hidden = terms.length > 0;
    note.textContent = L.noMatch;
    if (!terms.length) terms = data.glossary;
    const list = $("glossary-terms");
    list.textContent = "";
    for (const term of terms) list.appendChild(termItem(term));
  }

  function termItem(term) {
    const item = document.createElement("li");
    const words = document.createElement("div");
    const preferred = document.createElement("strong");
    preferred.textContent = term.preferred;
    words.append(preferred);
    if (term.code) words.append(" ", Object.assign(document.createElement("span"), { className: "code", textContent: term.code }));
    const plain = Object.assign(document.createElement("div"), { className: "muted small" });
    plain.textContent = `“${term.term}”${term.note ? ` · ${term.note}` : ""}`;
    words.append(plain);
    const use = Object.assign(document.createElement("button"), { type: "button", textContent: L.useTerm });
    use.className = "small-button";
    use.dataset.term = term.id;
    use.addEventListener("click", () => replaceSelection(keepSpacing(term.preferred), term.id));
    item.append(words, use);
    return item;
  }

  function keepSpacing(replacement) {
    // A selection usually carries the space before a word; the glossary term does not.
    const selected = state.selection ? state.selection.text : "";
    const lead = selected.match(/^\s*/)[0];
    const trail = selected.match(/\s*$/)[0];
    return lead + replacement.trim() + (selected.trim() ? trail : "");
  }

  // The server counts characters (code points); the DOM counts UTF-16 units (an emoji is two).
  function toCodePoints(text, units) {
    return Array.from(text.slice(0, units)).length;
  }

  function toUnits(text, codePoints) {
    return Array.from(text).slice(0, codePoints).join("").length;
  }

  function replaceSelection(text, termId) {
    if (!state.selection) return;
    const { start, end } = state.selection;
    const shown = textOf(state.tokens);
    const args = { start: toCodePoints(shown, start), end: toCodePoints(shown, end), text };
    if (termId) args.glossary_term = termId;
    command("edit", args)
      .then(closeEditor)
      .catch((error) => notify(error.message, true));
  }

  // --- the pause panel ---------------------------------------------------------------------

  function renderPause() {
    const pause = state.status === "paused" && state.live ? state.pause : null;
    A.refresh();
    $("pause-panel").hidden = !pause;
    $("pause-attention-card").hidden = !(pause && pause.attention && pause.attention.layers && !pause.attentionStale);
    if (!pause) return;
    renderReason(pause);
    renderMute(pause);
    renderAlternatives(pause.alternatives || []);
    // The history covers the tokens written; the pause is about the next one: its point last.
    const next = nextSignals(pause);
    renderSpark("probability", [...((pause.history && pause.history.probability) || []), next.top1], 1);
    renderSpark("entropy", [...((pause.history && pause.history.entropy) || []), next.entropy], null);
    if (pause.attention && pause.attention.layers && !pause.attentionStale) A.renderPauseHeatmap();
  }

  function nextSignals(pause) {
    const signals = (pause.evidence && pause.evidence.signals) || {};
    const first = (pause.alternatives || [])[0];
    if (pause.edited) return { top1: first ? first.prob : null, entropy: pause.nextEntropy ?? null };
    return { top1: signals.top1_prob ?? (first ? first.prob : null), entropy: signals.entropy ?? null };
  }

  // Why a policy fired, in the page's language: the template for its kind filled from the
  // decision's evidence; the engine's own (English) reason when there is none or a value is missing.
  function reasonText(decision) {
    const template = (data.reasonTemplates || {})[decision.kind];
    if (!template) return decision.reason || "";
    const values = { ...(decision.evidence || {}) };
    if (Array.isArray(values.window)) [values.start, values.end] = values.window;
    if (values.object && typeof values.object === "object" && values.key in values.object) {
      values.value = JSON.stringify(values.object[values.key]);
    }
    let missing = false;
    const text = template.replace(/%\((\w+)\)s/g, (_, key) => {
      const value = values[key];
      if (value === undefined || value === null) missing = true;
      if (typeof value === "number" && isProbability(decision.kind, key)) return percent(value);
      return typeof value === "number" && !Number.isInteger(value) ? value.toFixed(2) : String(value);
    });
    return missing ? decision.reason || "" : text;
  }

  function isProbability(kind, key) {
    return /prob/.test(key) || (key === "threshold" && ["low_confidence", "overconfidence"].includes(kind));
  }

  function renderReason(pause) {
    const box = $("pause-reason");
    box.textContent = "";
    if (pause.kind === "manual" || pause.trigger === "manual") {
      box.appendChild(line(L.manual, "reason-main"));
    } else {
      const head = line("", "reason-main");
      head.append(fill(L.labelled, { label: L.policy }), Object.assign(document.createElement("strong"), { textContent: policyName(pause.trigger) }));
      box.append(head, line(reasonText(pause), "reason-text"));
    }
    if (pause.span) {
      const matched = line(fill(L.labelled, { label: L.matched }), "reason-match");
      matched.appendChild(Object.assign(document.createElement("mark"), { textContent: textOf(state.tokens).slice(pause.span[0], pause.span[1]), translate: false }));
      box.appendChild(matched);
    }
    box.appendChild(whereLine(pause));
  }

  // "Paused after “…the last words”": where it stopped, in the words a reviewer reads; a
  // pause inside a word (the likeliest next piece continues it) says so.
  function whereLine(pause) {
    const text = textOf(state.tokens);
    const words = W.tailWords(text, 5);
    const where = line("", "reason-where small");
    if (!words) {
      where.textContent = L.pausedAtStart;
      return where;
    }
    const next = (pause.alternatives || [])[0];
    const inside = next && next.text && !W.startsWord(text, next.text);
    const [before, after] = (inside ? L.pausedInsideWord : L.pausedAfter).split("%(words)s");
    const quoted = Object.assign(document.createElement("span"), { textContent: `…${words}`, translate: false });
    where.append(before, quoted, after || "");
    return where;
  }

  // Mute the policy that paused, for the rest of this session (or undo it).
  function renderMute(pause) {
    const button = $("mute-policy");
    const policy = pause && pause.kind !== "manual" && pause.trigger !== "manual" ? pause.trigger : null;
    button.hidden = !policy;
    if (!policy) return;
    const muted = (state.muted || data.mutedPolicies || []).includes(policy);
    button.textContent = (muted ? L.unmute : L.mute).replace("%(policy)s", policyName(policy));
    button.onclick = () => command(muted ? "unmute" : "mute", { policy }).catch((error) => notify(error.message, true));
  }

  function renderAlternatives(alternatives) {
    const list = $("alternatives");
    list.textContent = "";
    if (!alternatives.length) list.appendChild(line(L.noAlternatives, "muted"));
    const best = alternatives.length ? alternatives[0].prob : 1;
    const branches = new Map(((state.pause && state.pause.lookahead) || { branches: [] }).branches.map((b) => [b.token_id, b]));
    const context = textOf(state.tokens);
    for (const alt of alternatives) {
      const item = document.createElement("li");
      const button = document.createElement("button");
      button.type = "button";
      button.className = "alt";
      button.dataset.tokenId = alt.token_id;
      const bar = Object.assign(document.createElement("span"), { className: "bar" });
      bar.style.width = `${Math.max(2, (alt.prob / best) * 100)}%`;
      const branch = branches.get(alt.token_id);
      const word = alternativeLabel(alt, branch, context);
      button.append(word.label, bar, Object.assign(document.createElement("span"), { className: "prob", textContent: percent(alt.prob) }));
      if (word.preview) button.append(word.preview);
      button.addEventListener("click", () => chooseAlternative(alt.token_id));
      item.appendChild(button);
      list.appendChild(item);
    }
  }

  // An alternative as the word it would start, and (with a look-ahead) its sentence.
  function alternativeLabel(alt, branch, context) {
    const label = Object.assign(document.createElement("span"), { className: "alt-word" });
    const plain = W.plainLabel(alt.text, L, branch && branch.ids.length === 1 && branch.ends);
    const added = branch ? branch.text : alt.text;
    const found = plain && !branch ? null : W.alternativeWord(context, added);
    if (plain && (!found || W.isSpecial(alt.text) || branch?.ends)) {
      label.textContent = plain;
      label.classList.add("plain");
      return { label, preview: null };
    }
    if (!found) {
      label.textContent = visible(alt.text) || alt.text;
      return { label, preview: null };
    }
    label.textContent = found.word;
    label.translate = false;
    if (!branch) return { label, preview: null };
    const preview = Object.assign(document.createElement("span"), { className: "alt-preview", translate: false });
    const mark = Object.assign(document.createElement("mark"), { textContent: found.word });
    preview.append(`…${found.before ? `${found.before} ` : ""}`, mark, `${found.after}${branch.ends ? "" : "…"}`);
    if (branch.ends) preview.append(` (${L.endHere})`);
    return { label, preview };
  }

  const policyName = (name) => (data.policyNames || {})[name] || name;

  function showStopReason(reason) {
    const text = (L.stopReasons || {})[reason];
    if (!text) return;
    const box = $("stop-reason");
    box.textContent = fill(text, { limit: data.maxNewTokens });
    box.hidden = false;
  }

  function chooseAlternative(tokenId) {
    // The choice is applied to the frozen state first; then generation continues from it.
    command("choose", { token_id: tokenId })
      .then(() => command("resume"))
      .catch((error) => notify(error.message, true));
  }

  function renderSpark(name, values, fixedMax) {
    const svg = $(`spark-${name}`);
    const numbers = values.filter((v) => typeof v === "number");
    const max = fixedMax || Math.max(0.001, ...numbers);
    const step = values.length > 1 ? 200 / (values.length - 1) : 0;
    const points = values
      .map((v, i) => (typeof v === "number" ? `${(i * step).toFixed(1)},${(34 - (v / max) * 32).toFixed(1)}` : null))
      .filter(Boolean)
      .join(" ");
    svg.innerHTML = `<polyline fill="none" stroke-width="1.5" points="${points}"></polyline>`;
    const last = numbers.length ? numbers[numbers.length - 1] : null;
    $(`spark-${name}-last`).textContent =
      last === null ? "" : name === "probability" ? percent(last) : last.toFixed(2);
  }

  // --- attention (attention.js draws it) ---------------------------------------------------

  const A = window.CaesuraAttention;

  // The pause carries one layer's heads; another layer's come from the worker on request.
  function showHeadsOf(layer) {
    const attention = state.pause && state.pause.attention;
    if (!attention || state.pause.attentionStale) return;
    if (layer === attention.layer) {
      A.renderPauseHeatmap();
      return;
    }
    const note = $("heads-note");
    note.hidden = false;
    note.textContent = L.loadingHeads.replace("%(layer)s", layer);
    command("attention", { layer }).catch((error) => {
      note.hidden = true;
      notify(`${L.error}: ${error.message}`, true);
    });
  }

  function applyAttention(event) {
    const pause = state.pause;
    if (!pause || !pause.attention || pause.attentionStale || event.position !== pause.position) return;
    pause.attention.heads = event.heads;
    pause.attention.layer = event.layer;
    if (state.live) A.renderPauseHeatmap();
  }

  const scheduleLiveHeatmap = () => A.scheduleLive();

  // --- controls, decision, timeline --------------------------------------------------------

  function renderControls() {
    renderRunButton();
    $("connection").hidden = ENDED.has(state.status); // nothing live to show any more
    $("decision-panel").hidden = !(state.status === "paused" || state.status === "generated");
    const deciding = waitingFor("approve", "reject");
    $("approve").disabled = deciding;
    $("reject").disabled = deciding;
    if (FINAL.has(state.status)) {
      const note = state.status === "failed" ? data.error : state.decisionComment;
      const label = data.statusLabels[state.status] || state.status;
      $("decided-panel").hidden = false;
      $("decided-text").replaceChildren(...decidedParts(label, note));
      renderDecidedBy();
    } else if (state.status === "running") {
      $("decided-panel").hidden = true; // a failed session resumed
    }
  }

  // "approved: <comment>": the comment (or the error) is someone's own words, never translated.
  function decidedParts(label, note) {
    if (!note) return [label];
    const [before, after] = L.decided.replace("%(status)s", label).split("%(note)s");
    const quoted = Object.assign(document.createElement("span"), { textContent: note, translate: false });
    return [before, quoted, after || ""];
  }

  function renderRunButton() {
    const button = $("toggle-run");
    if (!button) return; // an ended session is rendered without one
    const running = state.status === "running";
    // A failed session resumes too, from its stored tokens (e.g. after an outage).
    const resumable = state.status === "paused" || state.status === "failed";
    const live = running || resumable;
    if (!live && state.status !== "draft") {
      $("run-controls").remove(); // nothing can run again: no greyed control is left behind
      return;
    }
    $("run-controls").hidden = !live;
    // A pause or resume still waiting for its answer: a second press would only be refused.
    button.disabled = !live || waitingFor("pause", "resume");
    button.textContent = running ? L.pause : L.resume;
    button.classList.toggle("paused", resumable);
  }

  // Who decided and when, in the page's language and the reader's time zone.
  function renderDecidedBy() {
    const decision = state.decision;
    const box = $("decided-by");
    box.hidden = !decision || state.status === "failed";
    if (box.hidden) return;
    const time = document.createElement("time");
    time.dateTime = decision.time;
    time.textContent = DATE_TIME.format(new Date(decision.time));
    const [before, after] = fill(L.decidedBy, { actor: "\u0000", time: "\u0001" }).split("\u0001");
    const [start, middle] = before.split("\u0000");
    const who = Object.assign(document.createElement("strong"), { textContent: decision.actor, translate: false });
    box.replaceChildren(start, who, middle, time, after || "");
  }

  function toggleRun() {
    const name = { running: "pause", paused: "resume", failed: "resume" }[state.status];
    if (!name || !$("toggle-run") || waitingFor("pause", "resume")) return;
    const from = state.status;
    const sent = command(name);
    renderControls();
    sent
      .then(() => {
        renderControls();
        if (state.status !== from) return;
        // Its status event is still on the way; until then a press would only be refused.
        if ($("toggle-run")) $("toggle-run").disabled = true;
        setTimeout(renderControls, 3000); // never leave it disabled for good
      })
      .catch((error) => {
        notify(error.message, true);
        renderControls();
      });
  }

  function decide(name) {
    const comment = $("decision-comment").value.trim();
    if (name === "reject" && !comment) {
      notify(L.commentRequired, true);
      $("decision-comment").focus();
      return;
    }
    const sent = command(name, { comment });
    renderControls();
    sent
      .then(() => {
        state.decisionComment = comment;
        state.decision = { actor: data.user, time: new Date().toISOString() };
        setStatus(name === "approve" ? "completed" : "rejected"); // its status event may lag
      })
      .catch((error) => {
        notify(error.message, true);
        renderControls();
      });
  }

  let timelineTimer = null;

  function refreshTimelineSoon() {
    clearTimeout(timelineTimer);
    timelineTimer = setTimeout(refreshTimeline, 300);
  }

  function refreshTimeline() {
    fetch(data.auditUrl, { credentials: "same-origin" })
      .then((response) => (response.ok ? response.json() : { entries: [] }))
      .then((body) => renderTimeline(body.entries))
      .catch(() => {});
  }

  function renderTimeline(entries) {
    const list = $("timeline");
    list.textContent = "";
    for (const entry of entries) {
      const item = document.createElement("li");
      const when = TIME.format(new Date(entry.time));
      const actor = Object.assign(document.createElement("span"), { textContent: entry.actor });
      if (entry.actor !== L.system) actor.translate = false; // a username
      item.append(
        Object.assign(document.createElement("time"), { textContent: when, dateTime: entry.time }),
        " ",
        Object.assign(document.createElement("strong"), { textContent: entry.action }),
        Object.assign(document.createElement("span"), { className: "muted", textContent: " · " }),
        actor
      );
      actor.className = "muted";
      if (entry.detail) {
        const detail = line(entry.detail, "detail");
        if (entry.quotes) detail.translate = false; // what a person or the model wrote
        item.appendChild(detail);
      }
      list.appendChild(item);
    }
    noteDecision(entries);
  }

  // A decision made elsewhere (another tab, staff) reaches this page through the timeline.
  function noteDecision(entries) {
    const last = entries.filter((e) => ["approve", "reject", "cancel"].includes(e.kind)).pop();
    if (!last || !FINAL.has(state.status)) return;
    state.decision = { actor: last.actor, time: last.time };
    if (last.kind !== "cancel" && last.detail && !state.decisionComment) state.decisionComment = last.detail;
    renderControls();
  }

  let noticeTimer = null;

  function notify(text, bad) {
    const notice = $("notice");
    notice.textContent = text;
    notice.classList.toggle("bad", !!bad);
    notice.hidden = false;
    clearTimeout(noticeTimer);
    noticeTimer = setTimeout(() => (notice.hidden = true), 8000);
  }

  // --- wiring ------------------------------------------------------------------------------

  function typing(target) {
    return target.closest("input, textarea, select, button, [contenteditable]");
  }

  function bind() {
    const box = $("tokens");
    // Hovering is a mouse's: a tap's tip stays until the next tap, even when the page moves
    // under the finger (a tap also shows that word's attention).
    const hovered = (e) => e.pointerType === "mouse" && wordOf(e.target);
    box.addEventListener("pointerover", (e) => hovered(e) && showTip(hovered(e)));
    box.addEventListener("pointerout", (e) => e.pointerType === "mouse" && hideTip());
    box.addEventListener("mouseup", () => setTimeout(textSelected, 0));
    box.addEventListener("click", tokenTapped);
    box.addEventListener("contextmenu", tokenMenuRequested);
    box.addEventListener("touchstart", pressStarted, { passive: true });
    for (const name of ["touchend", "touchmove", "touchcancel"]) box.addEventListener(name, pressEnded, { passive: true });
    document.addEventListener("click", (e) => {
      if (!e.target.closest("#token-menu") && !wordOf(e.target)) hideMenu();
      if (!wordOf(e.target)) hideTip(); // a tapped word's tip stays until the next tap
    });
    $("rollback-here").addEventListener("click", rollbackHere);
    $("replace-here").addEventListener("click", replaceHere);
    window.addEventListener("scroll", hideTip, { passive: true });
    $("toggle-run")?.addEventListener("click", toggleRun);
    $("approve").addEventListener("click", () => decide("approve"));
    $("reject").addEventListener("click", () => decide("reject"));
    $("edit-close").addEventListener("click", closeEditor);
    $("glossary-filter").addEventListener("input", renderGlossary);
    $("edit-apply").addEventListener("click", () => replaceSelection($("edit-text").value, null));
    document.addEventListener("keydown", (e) => {
      if (e.code !== "Space" || typing(e.target) || e.repeat) return;
      e.preventDefault(); // the space bar pauses and resumes; it must not scroll the page
      toggleRun();
    });
  }

  bind();
  A.init(state, { showHeadsOf });
  setStatus(state.status);
  refreshTimeline();
  restoreOutbox();
  connect();
  // What the keyboard (keys.js) drives; for scripted checks: the state and a dropped connection.
  const actions = {
    toggleRun,
    decide,
    hideMenu,
    closeEditor,
    openMenu,
    openEditor,
    replaceWord,
    showWordAttention: (position) => A.focusWord(position),
    choose: (index) => {
      const alternative = state.status === "paused" && state.pause && (state.pause.alternatives || [])[index];
      if (alternative) chooseAlternative(alternative.token_id);
      return Boolean(alternative);
    },
  };
  window.caesura = { state, actions, drop: () => state.socket && state.socket.close(), showHeadsOf };
})();
