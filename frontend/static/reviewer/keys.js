// The session page from the keyboard: every review step without the mouse. `?` lists the keys
// (the #keys-help dialog); session.js does the work through window.caesura.actions.
(function () {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const { state, actions } = window.caesura;
  const box = $("tokens");
  let intent = "approve"; // what Ctrl+Enter in the comment does: set by `a` or `x`

  const tokens = () => [...box.querySelectorAll(".tok")];
  const focusedToken = () => document.activeElement?.closest?.(".tok");

  function focusToken(element) {
    if (!element) return;
    element.focus();
    element.scrollIntoView({ block: "nearest" });
  }

  function tokenAt(position) {
    // The token just before a position (a pause at p comes after p tokens).
    const all = tokens();
    return all.filter((t) => +t.dataset.pos < position).pop() || all[0];
  }

  function moveToken(step) {
    const all = tokens();
    const index = all.indexOf(focusedToken());
    focusToken(all[Math.max(0, Math.min(all.length - 1, index + step))]);
  }

  function movePause(step) {
    const positions = [...state.pausePositions].sort((a, b) => a - b);
    if (!positions.length) return;
    const here = focusedToken() ? +focusedToken().dataset.pos + 1 : step > 0 ? -1 : Infinity;
    const next = step > 0 ? positions.find((p) => p > here) : positions.filter((p) => p < here).pop();
    focusToken(tokenAt(next ?? (step > 0 ? positions[positions.length - 1] : positions[0])));
  }

  function replaceFocused() {
    const token = focusedToken();
    if (!token || state.status !== "paused") return;
    const start = +token.dataset.start;
    actions.openEditor(start, start + token.textContent.length);
    $("edit-text").focus();
    $("edit-text").select();
  }

  function prepareDecision(name) {
    const comment = $("decision-comment");
    if ($("decision-panel").hidden) return;
    intent = name;
    $("decision-hint").textContent = $("decision-hint").dataset[name];
    $("decision-hint").hidden = false;
    comment.focus();
  }

  function openHelp() {
    const dialog = $("keys-help");
    if (!dialog.open) dialog.showModal();
  }

  // Keys that act anywhere but in a text field.
  const KEYS = {
    "?": openHelp,
    j: () => movePause(1),
    k: () => movePause(-1),
    a: () => prepareDecision("approve"),
    x: () => prepareDecision("reject"),
    e: replaceFocused,
    w: () => (focusedToken() ? actions.showWordAttention(+focusedToken().dataset.pos) : window.CaesuraAttention.back()),
    n: () => $("next-case") && !$("decided-panel").hidden && $("next-case").click(),
    ArrowRight: () => focusedToken() && moveToken(1),
    ArrowLeft: () => focusedToken() && moveToken(-1),
    Home: () => focusedToken() && focusToken(tokens()[0]),
    End: () => focusedToken() && focusToken(tokens().pop()),
  };

  function onKey(event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    if (target.closest("input, textarea, select, [contenteditable]")) return;
    if ((event.key === "Enter" || event.key === "r") && target.closest(".tok")) {
      event.preventDefault();
      actions.openMenu(target.closest(".tok")); // roll back here, once confirmed in the menu
      return;
    }
    if (/^[1-5]$/.test(event.key) && actions.choose(+event.key - 1)) {
      event.preventDefault();
      return;
    }
    const run = KEYS[event.key];
    if (!run) return;
    event.preventDefault();
    run();
  }

  function onMenuKey(event) {
    if (event.key !== "Escape") return;
    const position = state.menuPosition;
    actions.hideMenu();
    focusToken(box.querySelector(`.tok[data-pos="${position}"]`));
  }

  function onEditKey(event) {
    if (event.key === "Escape") {
      actions.closeEditor();
      focusToken(lastFocused);
    } else if (event.key === "Enter" && event.target.id === "edit-text") {
      event.preventDefault();
      $("edit-apply").click();
    }
  }

  function onCommentKey(event) {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      actions.decide(intent);
    }
  }

  // Tab into the text lands on the last token, or the one the reviewer was on.
  let lastFocused = null;
  box.addEventListener("focusin", (event) => {
    if (event.target.closest(".tok")) lastFocused = event.target.closest(".tok");
  });
  box.addEventListener("focus", (event) => {
    if (event.relatedTarget && box.contains(event.relatedTarget)) return; // Shift+Tab out of it
    focusToken(lastFocused && box.contains(lastFocused) ? lastFocused : tokens().pop());
  });

  document.addEventListener("keydown", onKey);
  $("token-menu").addEventListener("keydown", onMenuKey);
  $("decision-comment").addEventListener("keydown", onCommentKey);
  $("edit-panel").addEventListener("keydown", onEditKey);
  $("keys-help-close").addEventListener("click", () => $("keys-help").close());
  $("keys-help-open").addEventListener("click", openHelp);
})();
