"""The clients bench/desk.py drives the stack with: the HTTP API (a token) and a reviewer's
page in a real browser (Debian's chromium under Playwright; the plain websocket watchers of a
session are bench/watchers.py); what the worker stored, read from Postgres; and what the
stack's processes spend of the machine's CPU meanwhile."""

from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from gateway_stack import wait_until

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip


class Api:
    """``/api/`` with a reviewer's token."""

    def __init__(self, url: str, key: str) -> None:
        self.url, self.key = url, key

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + "/api" + path, data=data, method=method)
        request.add_header("Authorization", f"Token {self.key}")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            raise ApiRefused(exc.code, exc.read().decode(errors="replace")) from None


class ApiRefused(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"{status}: {body[:300]}")
        self.status = status


def percentiles(values: list[float]) -> dict:
    if not values:
        return {"p50": None, "p95": None, "n": 0}
    ms = sorted(values)
    p95 = ms[max(0, math.ceil(0.95 * len(ms)) - 1)]  # nearest rank
    return {"p50": round(statistics.median(ms), 1), "p95": round(p95, 1), "n": len(ms)}


# ---- the database, as the worker stored it ---------------------------------------------------
def status_of(sid: int) -> str:
    from reviewer.models import ReviewSession

    return ReviewSession.objects.filter(pk=sid).values_list("status", flat=True).get()


def last_seq(sid: int) -> int:
    from reviewer.models import ReviewSession

    return ReviewSession.objects.filter(pk=sid).values_list("last_seq", flat=True).get()


STAGES = ("woke", "read", "turn", "step", "honoured", "reported", "stored")


def pause_stages(sessions: list[int], since: float) -> dict:
    """The manual pauses' paths since ``since``, stage by stage (reviewer.lifecycle.stages_ms:
    ms from the request, as their pause events carry them), each as percentiles, and the
    time from the halt's turn to the halt (``turn_to_halt``: the calls, the pacing and the
    boundary of the turn that halted), ``turn_beyond_previous_turn``, and the whole paths of
    the ``SLOWEST`` halts beyond their step (``slowest``)."""
    from datetime import UTC, datetime

    from reviewer.models import PauseEvent

    ids = set(
        PauseEvent.objects.filter(
            session_id__in=sessions,
            kind="manual",
            requested_at__gte=datetime.fromtimestamp(since, UTC),
        ).values_list("pk", flat=True)
    )
    paths = [p for pk, p in stages_by_pause(sessions).items() if pk in ids]
    out = {
        k: percentiles([p[k] for p in paths if k in p])
        for k in (*STAGES, "step_ms", "previous_turn_ms")
    }
    out["turn_to_halt"] = percentiles(
        [p["honoured"] - p["turn"] for p in paths if "honoured" in p and "turn" in p]
    )
    # Over 0: the request came before the turn before the halting one began, and that turn
    # still did not honour it (the flag reached the loop late); at most 0 otherwise.
    out["turn_beyond_previous_turn"] = percentiles(
        [
            p["turn"] - p["previous_turn_ms"]
            for p in paths
            if "previous_turn_ms" in p and "turn" in p
        ]
    )
    # The paths of the halts furthest beyond their step: what a tail is made of.
    beyond = [p for p in paths if "honoured" in p and "step_ms" in p]
    out["slowest"] = sorted(beyond, key=lambda p: p["honoured"] - p["step_ms"])[-SLOWEST:]
    return out


SLOWEST = 3


def stages_by_pause(sessions: list[int]) -> dict[int, dict]:
    """The ``stages`` of these sessions' pause events, by pause id (manual pauses only)."""
    from reviewer.models import SessionEvent

    rows = SessionEvent.objects.filter(session_id__in=sessions, type="pause")
    payloads = rows.values_list("payload", flat=True)
    return {p["pause_id"]: p["stages"] for p in payloads if p.get("stages")}


def token_times(sessions: list[int], after: dict[int, int] | None = None) -> list[float]:
    """When each token event of these sessions was stored (after the given seq of each)."""
    from reviewer.models import SessionEvent

    rows = SessionEvent.objects.filter(session_id__in=sessions, type="token")
    return sorted(
        created.timestamp()
        for sid, seq, created in rows.values_list("session_id", "seq", "created_at")
        if seq > (after or {}).get(sid, 0)
    )


def wait_status(sid: int, wanted: set[str], every: float = 0.01) -> str:
    return wait_until(
        lambda: (s := status_of(sid)) in wanted and s, f"session {sid} to be {wanted}", 300, every
    )


def wait_tokens(sid: int, after_seq: int, count: int) -> None:
    from reviewer.models import SessionEvent

    def enough() -> bool:
        rows = SessionEvent.objects.filter(session_id=sid, type="token", seq__gt=after_seq)
        return rows.count() >= count

    wait_until(enough, f"{count} tokens of session {sid}", 300)


# ---- the reviewer's page ---------------------------------------------------------------------
# Armed before the click: the click's own time (the input event's timestamp, taken in the
# capture phase before the page's handler runs) to the first frame after the pause panel is
# unhidden. Null after 60 s without it.
ARM = """() => {
  const panel = document.getElementById("pause-panel");
  const button = document.getElementById("toggle-run");
  window.__panelShown = new Promise((resolve) => {
    let clicked = null;
    button.addEventListener("click", (e) => { clicked = e.timeStamp; }, { capture: true, once: true });
    const observer = new MutationObserver(() => {
      if (panel.hidden || clicked === null) return;
      observer.disconnect();
      requestAnimationFrame(() => resolve(performance.now() - clicked));
    });
    observer.observe(panel, { attributes: true, attributeFilter: ["hidden"] });
    setTimeout(() => { observer.disconnect(); resolve(null); }, 60000);
  });
}"""


class Desk:
    """A reviewer's session page in chromium, logged in by the login form."""

    def __init__(self, url: str, username: str, password: str) -> None:
        from playwright.sync_api import sync_playwright

        if not Path(CHROMIUM).exists():
            raise RuntimeError(f"{CHROMIUM} is missing: `make browser` installs Debian's chromium")
        self.url = url
        self._playwright = sync_playwright().start()
        self.browser = self._playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        self.page = self.browser.new_page(viewport={"width": 1280, "height": 800})
        self.page.set_default_timeout(60_000)
        self.page.goto(url + "/login/")
        self.page.fill("#id_username", username)
        self.page.fill("#id_password", password)
        self.page.click("#log-in")
        self.page.wait_for_url(url + "/")

    def open(self, session: int) -> None:
        self.page.goto(f"{self.url}/sessions/{session}/")
        self.page.wait_for_selector("#tokens .tok")

    def wait_running(self) -> None:
        """The page knows the session runs again: its button pauses, its panel is gone."""
        self.page.wait_for_selector("#toggle-run:not([disabled]):not(.paused)")
        self.page.wait_for_selector("#pause-panel[hidden]", state="attached")

    def click_pause(self) -> float | None:
        """Click Pause: milliseconds until the panel shows (None: it never did)."""
        self.page.evaluate(ARM)
        self.page.click("#toggle-run")
        return self.page.evaluate("window.__panelShown")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.browser.close()
        with contextlib.suppress(Exception):
            self._playwright.stop()


# ---- commits ------------------------------------------------------------------------------
# In the benchmark's own database only: Postgres delivers a notification when the transaction
# that stored the event commits, whatever code stored it.
NOTIFY_ON_COMMIT = """
CREATE OR REPLACE FUNCTION desk_bench_stored() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('desk_bench_stored', NEW.session_id || ' ' || NEW.seq);
    RETURN NULL;
END $$ LANGUAGE plpgsql;
CREATE OR REPLACE TRIGGER desk_bench_stored AFTER INSERT ON reviewer_sessionevent
    FOR EACH ROW EXECUTE FUNCTION desk_bench_stored();
"""


class Commits(threading.Thread):
    """When each event's transaction committed, as a listener on this machine hears it:
    ``at[(session, seq)] = time.time()``."""

    def __init__(self, database_url: str) -> None:
        super().__init__(daemon=True)
        import psycopg

        self.connection = psycopg.connect(database_url, autocommit=True)
        self.connection.execute(NOTIFY_ON_COMMIT)
        self.connection.execute("LISTEN desk_bench_stored")
        self.at: dict[tuple[int, int], float] = {}
        self.stopping = False

    def run(self) -> None:
        while not self.stopping:
            for note in self.connection.notifies(timeout=0.5):
                session, seq = note.payload.split()
                self.at[(int(session), int(seq))] = time.time()

    def stop(self) -> None:
        self.stopping = True
        self.join(5)
        self.connection.execute("DROP TRIGGER IF EXISTS desk_bench_stored ON reviewer_sessionevent")
        self.connection.close()


# ---- the machine ---------------------------------------------------------------------------
class CpuMeter:
    """CPU the stack's processes spent between ``start`` and ``read`` (1.0 = one core busy),
    beside the whole machine's and its load average: other work shares these cores."""

    def __init__(self, processes: dict[str, int]) -> None:
        self.pids = processes
        self.ticks = os.sysconf("SC_CLK_TCK")
        self.started: dict[str, float] = {}
        self.machine = (0.0, 0.0)
        self.at = 0.0

    def _cpu(self, pid: int) -> float:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / self.ticks  # utime + stime

    def _machine(self) -> tuple[float, float]:
        """(busy, all) CPU seconds of every core since boot."""
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        idle = values[3] + values[4]  # idle + iowait
        return (sum(values) - idle) / self.ticks, sum(values) / self.ticks

    def start(self) -> None:
        self.at = time.monotonic()
        self.started = {name: self._cpu(pid) for name, pid in self.pids.items()}
        self.machine = self._machine()

    def read(self) -> dict:
        wall = time.monotonic() - self.at
        spent = {n: self._cpu(p) - self.started.get(n, 0.0) for n, p in self.pids.items()}
        busy, total = (now - then for now, then in zip(self._machine(), self.machine, strict=True))
        cores = os.cpu_count() or 1
        return {
            "wall_s": round(wall, 1),
            "cores": cores,
            "cpu_share": {n: round(s / wall, 2) for n, s in spent.items()},
            "machine_busy_cores": round(cores * busy / total, 2) if total else None,
            "loadavg_1m": round(os.getloadavg()[0], 2),
        }
