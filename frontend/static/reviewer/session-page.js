// The session page's entry point, loaded by reviewer/session_detail.html as a module: it
// wires the modules to the store (store.js), draws the rendered state and connects. A live
// view of one review session over its websocket; no other module runs anything on load.
//
// It is also the one module that writes to `window`, for scripted checks (tests/browser/):
//   window.caesura = {state, drop, showHeadsOf}: the page state (store.state: tokens, live,
//     pause, outbox ...), a connection dropped as a network would drop it, and a layer's heads
//     asked for as a click on the heatmap asks;
//   window.CaesuraAttention = {focused, shares}: the word whose attention the bars show (null:
//     the pause's), and the shares they show.
import { bindAttentionPlots, showHeadsOf } from "./attention-plots.js";
import { bindAttention, focused, shares } from "./attention.js";
import { bindChanges } from "./changes.js";
import { bindClaim } from "./claim.js";
import { bindCommands, dropped, failAll, flush, reply, restore } from "./commands.js";
import { bindControls } from "./controls.js";
import { bindEditor } from "./editor.js";
import { apply, caughtUp } from "./events.js";
import { bindKeys } from "./keys.js";
import { bindMenu, hideMenu } from "./menu.js";
import { $, L } from "./page.js";
import { STATUS } from "./protocol.js";
import { bindPausePanel } from "./pause-panel.js";
import { connect, drop } from "./socket.js";
import { setStatus, store } from "./store.js";
import { bindStream } from "./stream.js";
import { bindTaskType } from "./task-type.js";
import { refreshTimeline } from "./timeline.js";
import { bindTip } from "./tip.js";
import { bindTrackedSpans } from "./tracked-spans.js";

bindTrackedSpans();
bindControls();
bindEditor(hideMenu);
bindMenu();
bindTip();
bindChanges();
bindAttention();
bindPausePanel();
bindAttentionPlots();
bindStream();
bindCommands();
bindKeys();
bindClaim();
bindTaskType();
bindEngineLoading();

// On a phone a long case text filled the first screens, above the text and the pause: there
// it starts folded (its summary opens it); a wider screen shows it open, as rendered.
const CASE_FOLD_CHARS = 400;
function foldLongCaseOnPhone() {
  const box = document.querySelector("details.case");
  const narrow = window.matchMedia("(max-width: 600px)").matches;
  if (box && narrow && $("case-text").textContent.length > CASE_FOLD_CHARS) box.open = false;
}
foldLongCaseOnPhone();

// A session started while the worker still loads its model: the page said why no text comes;
// the first token (or any other status) ends that.
function bindEngineLoading() {
  const note = $("engine-loading");
  if (!note) return;
  const over = () => (note.hidden = note.hidden || store.state.tokens.length > 0 || store.state.status !== STATUS.RUNNING);
  store.subscribe("tokens", over);
  store.subscribe("status", over);
}

setStatus(store.state.status);
refreshTimeline();
restore();
connect({ opened: flush, event: apply, reply, dropped, gone: () => failAll(L.closed), caughtUp });

window.caesura = { state: store.state, drop, showHeadsOf };
window.CaesuraAttention = { focused, shares };
