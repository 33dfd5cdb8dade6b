// The claim on a generation from an application (an ownerless session): who holds it, a
// Claim or Release button, and a light renewal while the holder works on the page (any
// command renews it on the server already; reading and selecting do not, so activity here
// claims again, which renews one's own claim). A reviewer's own session has no claim bar.
import { STATUS_GROUP } from "./protocol.js";
import { command, waitingFor } from "./commands.js";
import { notify } from "./notice.js";
import { $, data, fill, L } from "./page.js";
import { store } from "./store.js";

const RENEW_GAP_MS = 30_000; // at most one renewal per half minute of activity
let lastRenew = 0;

const claim = () => store.state.claim || {};
const mine = () => claim().claimed_by === data.user;
const waiting = () => STATUS_GROUP.WAITING.includes(store.state.status);

function render() {
  const holder = claim().claimed_by;
  const button = $("claim-toggle");
  let text;
  if (STATUS_GROUP.FINAL.includes(store.state.status)) {
    // The reviewer of record: the claim as it stands (an ended session's claim lapses but
    // keeps its holder), else as the page was rendered, else who decided here.
    const reviewer = holder || data.claimedBy || store.state.decision?.actor;
    text = reviewer ? fill(L.claimEnded, { reviewer }) : "";
  } else if (mine()) {
    text = fill(L.claimMine, { time: new Date(claim().expires_at).toLocaleTimeString() });
  } else if (holder) {
    text = fill(L.claimHeld, { reviewer: holder });
  } else {
    text = L.claimOpen;
  }
  $("claim-holder").textContent = text;
  button.hidden = !(mine() || (!holder && waiting()));
  $("claim-key").hidden = button.hidden; // the key does what the button does: no button, no key
  button.textContent = mine() ? L.release : L.claim;
  button.dataset.action = mine() ? "release" : "claim";
}

// The page's data and a command's answer name the expiry claim_expires_at; events expires_at.
const asClaim = (info) => ({ claimed_by: info.claimed_by, expires_at: info.claim_expires_at });

function taken(result) {
  store.set({ claim: asClaim(result) }, "claim");
}

export function toggleClaim() {
  const button = $("claim-toggle");
  if (!button || button.hidden || waitingFor("claim", "release")) return;
  command(button.dataset.action)
    .then(taken)
    .catch((error) => notify(error.message, true));
}

// Half the claim's time gone and the holder is here: claim again (a renewal).
function renewOnActivity() {
  if (!mine() || !waiting() || Date.now() - lastRenew < RENEW_GAP_MS) return;
  const left = Date.parse(claim().expires_at) - Date.now();
  if (left > (data.claimMinutes * 60_000) / 2) return;
  lastRenew = Date.now();
  command("claim").then(taken).catch(() => {}); // a lapsed claim shows in the bar's next event
}

export function bindClaim() {
  if (!data.onFloor || !$("claim-bar")) return;
  store.set({ claim: asClaim(data.claim) });
  store.subscribe("claim", render);
  store.subscribe("status", render);
  $("claim-toggle").addEventListener("click", toggleClaim);
  for (const name of ["keydown", "pointerdown"]) document.addEventListener(name, renewOnActivity, { passive: true });
  render();
}
