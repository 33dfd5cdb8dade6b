"""Benchmark the reviewer's desk on the real stack: how fast a pause shows, how fast the engine
halts, how late tokens reach many watchers. Prints one JSON object.

    python bench/desk.py              # the full benchmark, several minutes
    python bench/desk.py --quick      # tiny sizes: checks that it runs
    python bench/desk.py --pauses=10 --clients=20 --tokens=64 --rounds=3
    python bench/desk.py --watchers-only   # the token path alone (no browser, no pauses)
    python bench/desk.py --backend vllm    # the worker on vLLM (CAESURA_BACKEND=vllm)
    python bench/desk.py --sessions=1 --pauses-only   # one concurrency, no watchers

The stack is the one `make run` starts: a daphne server and one Celery worker process (solo
pool, the model loaded once), here over a throwaway database (created, migrated, dropped at
the end; the worker listens on a queue of its own; bench/gateway_stack.py; logs in
var/bench-desk-daphne.log and var/bench-desk-worker.log), with a domain
without pause policies and one reviewer, who logs in to a real browser (Debian's chromium
under Playwright) and calls the HTTP API with a token.

With 1 and with 8 sessions generating (``--quick``: 1 and 2), ``--pauses`` times each:
- ``panel_ms``: the reviewer clicks Pause on the session's page; from the click (the input
  event's own timestamp) to the first frame after the pause panel is unhidden.
- ``status_ms``: ``POST /api/sessions/<id>/pause`` to the session's status no longer
  ``running`` (read from Postgres every 5 ms); on another of the generating sessions.
- ``halt_minus_step_ms``: the server's own request-to-halt time of those manual pauses
  (``PauseEvent.latency_ms``) minus the engine's step time then (``step_ms``: the serving
  loop's median step, as the pause event's ``stages`` carry it; one vLLM step serves every
  session at once, one transformers step one session; else the median spacing of all
  sessions' tokens, as stored, in the 3 s before the request): what the stack adds to
  waiting for the step in progress. ``halt_stages_ms``: where the time went, stage by stage.

Watchers: one session generates ``--tokens`` tokens with no socket open, then the same
generation (same input and seed) with ``--clients`` plain websocket clients on it
(bench/watchers.py: over TCP to daphne, logged in by a session cookie, as a browser's socket
is; one lean thread reads them all, since they share the stack's cores); each session is
paused at its start while the clients connect, and timed from its resume. ``delay_ms``: a
token event's commit to its arrival at each client, the commit as this process hears it (a
trigger in the benchmark's own database notifies on every stored event, and Postgres
delivers a notification when its transaction commits);
``from_created_ms``: the same from the event's ``created_at`` (taken before it is written, so
the write is in it); ``spread_ms``: the first client to the last for one event;
``tok_s_ratio``: the session's tokens/s (its stored tokens' spacing) with the clients over
without, the median of the rounds' own ratios (``pair_ratios``); ``complete_in_order``: every
client received every event of the session exactly once, in sequence order. ``--rounds``
(5 by default; 3 before December 2026) pairs the two runs, unwatched first in even rounds and
watched first in odd ones; ``--tokens`` (128 by default; 64 before December 2026) is each
run's length: longer runs average the machine's other load over more steps.

``load`` gives, for each phase, the CPU share of daphne, the worker and this process (1.0 =
one core busy), the whole machine's busy cores and the load average: the stack shares its
cores with whatever else runs.

Shape: {"panel_ms": {"1": {"p50", "p95", "n"}, "8": {...}}, "status_ms": {...},
"halt_minus_step_ms": {...}, "step_ms": {...}, "latency_ms": {...}, "watchers": {"clients",
"delay_ms": {"p50", "p95", "max"}, "tok_s_ratio", "pair_ratios", "tok_s": {"0", "<clients>"},
"complete_in_order", "from_created_ms": {...}, "spread_ms": {...}}, "load": {...},
"targets": {...}, "setup": {...}}.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
# Playwright's sync API runs an event loop in this thread; the ORM here only sets up and reads.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

import desk_clients  # noqa: E402 - beside this script
import gateway_stack  # noqa: E402
from desk_clients import (  # noqa: E402
    last_seq,
    percentiles,
    status_of,
    token_times,
    wait_status,
    wait_tokens,
)
from watchers import Watchers  # noqa: E402

gateway_stack.LOG_PREFIX = "bench-desk"


def flag(name: str, default: int) -> int:
    return next(
        (int(a.split("=", 1)[1]) for a in sys.argv[1:] if a.startswith(f"--{name}=")), default
    )


def choice(name: str) -> str | None:
    """``--name=value`` or ``--name value``."""
    args = sys.argv[1:]
    for i, a in enumerate(args):
        if a.startswith(f"--{name}="):
            return a.split("=", 1)[1]
        if a == f"--{name}" and i + 1 < len(args):
            return args[i + 1]
    return None


QUICK = "--quick" in sys.argv[1:]
if (BACKEND := choice("backend")) is not None:  # the worker's (and settings') CAESURA_BACKEND
    os.environ["CAESURA_BACKEND"] = BACKEND
CONCURRENCY = tuple(int(n) for n in (choice("sessions") or ("1,2" if QUICK else "1,8")).split(","))
# Pauses of each kind (click, API) per concurrency: 20, so that a p95 is the 19th of 20 and
# not, as over 10, the slowest pause.
PAUSES = flag("pauses", 2 if QUICK else 20)
CLIENTS = flag("clients", 20)  # websocket watchers of one session
TOKENS = flag("tokens", 12 if QUICK else 128)  # tokens of each watched / unwatched run
# Pairs of runs, unwatched then watched, the other way round in odd rounds (a machine that grows
# faster or slower over the phase favours neither); an odd number of pairs, so that one pair
# slowed by the machine's other load does not decide the ratio
ROUNDS = flag("rounds", 1 if QUICK else 5)
WATCHERS_ONLY = "--watchers-only" in sys.argv[1:]  # no browser, no pauses: the token path alone
PAUSES_ONLY = "--pauses-only" in sys.argv[1:]  # no watchers: the pause figures alone
LONG = 1500  # max_new_tokens of the sessions generating: they must outlast the phase
ROTATE = 150  # events after which a paused session is replaced by a new one
PASSWORD = uuid.uuid4().hex
SUBJECTS = ["a lighthouse", "a glacier", "a market town", "a violin", "a night train",
            "an orchard", "a harbour", "an observatory"]  # fmt: skip


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def desk_floor():
    """A domain without policies (only the reviewer pauses) and its reviewer."""
    from django.contrib.auth.models import User

    from reviewer.models import Domain

    domain = Domain.objects.create(
        name="Desk", slug="desk", specialty="general",
        system_prompt="You are a careful writer. Answer in plain prose.",
    )  # fmt: skip
    reviewer = User.objects.create_user("rey", password=PASSWORD)
    domain.reviewers.add(reviewer)
    return domain, [], [reviewer]


# ---- pauses ---------------------------------------------------------------------------------
def start(api: desk_clients.Api, i: int, tokens: int = LONG, seed: int | None = None) -> int:
    body = {"domain": "desk", "input": f"Write a long story about {SUBJECTS[i % 8]}.",
            "seed": i if seed is None else seed, "max_new_tokens": tokens}  # fmt: skip
    return int(api.call("POST", "/sessions", body)["id"])


def resume(api: desk_clients.Api, sid: int) -> None:
    seq = last_seq(sid)
    api.call("POST", f"/sessions/{sid}/resume", {})
    wait_tokens(sid, seq, 3)


def api_pause(api: desk_clients.Api, sid: int) -> float:
    started = time.perf_counter()
    api.call("POST", f"/sessions/{sid}/pause", {})
    while status_of(sid) == "running":
        time.sleep(0.005)
    return 1000 * (time.perf_counter() - started)


def step_ms(times: list[float], at: float) -> float | None:
    """The median spacing of the tokens stored in the 3 s before ``at``."""
    recent = [t for t in times if at - 3 <= t <= at]
    gaps = [1000 * (b - a) for a, b in zip(recent, recent[1:], strict=False)]
    return statistics.median(gaps) if len(gaps) >= 2 else None


def halts(sessions: list[int], since: float) -> tuple[list[float], list[float], list[float]]:
    """The phase's manual pauses: latency, step, and latency minus step (ms); the stages
    of their paths (``halt_stages_ms``) come from their pause events."""
    from datetime import UTC, datetime

    from reviewer.models import PauseEvent

    times = token_times(sessions)
    rows = PauseEvent.objects.filter(
        session_id__in=sessions, kind="manual", requested_at__gte=datetime.fromtimestamp(since, UTC)
    )
    stages = desk_clients.stages_by_pause(sessions)
    latency, steps, minus = [], [], []
    for pause in rows:
        # the serving loop's own median step (a vLLM step serves every session at once);
        # the stored tokens' spacing where the pause does not carry it
        step = stages.get(pause.pk, {}).get("step_ms") or step_ms(
            times, pause.requested_at.timestamp()
        )
        if pause.latency_ms is None or step is None:
            continue
        latency.append(pause.latency_ms)
        steps.append(step)
        minus.append(pause.latency_ms - step)
    return latency, steps, minus


def pause_phase(api: desk_clients.Api, desk: desk_clients.Desk, n: int, meter) -> dict:
    """Pauses by click on the first session's page and by API on the last one, with ``n``
    sessions generating. The two are replaced by new sessions once they are ROTATE tokens
    long: the figures are about the pause, not about a page or a context that keeps growing."""
    rng, since = random.Random(n), time.time()
    sessions = [start(api, i) for i in range(n)]
    for sid in sessions:
        wait_tokens(sid, 0, 3)
    meter.start()
    panels, statuses, opened = [], [], None
    for k in range(PAUSES):
        for i in {0, n - 1}:
            if last_seq(sessions[i]) > ROTATE:
                stop([sessions[i]], api)
                sessions.append(sessions[i])  # still counted in the phase's pauses
                sessions[i] = start(api, i + 8 * k)
                wait_tokens(sessions[i], 0, 3)
        watched, target = sessions[0], sessions[n - 1]
        if opened != watched:
            desk.open(watched)
            opened = watched
        desk.wait_running()
        time.sleep(rng.uniform(0.05, 0.3))
        shown = desk.click_pause()
        wait_status(watched, {"paused"})
        if shown is not None:
            panels.append(shown)
        resume(api, watched)
        time.sleep(rng.uniform(0.05, 0.3))
        statuses.append(api_pause(api, target))
        wait_status(target, {"paused"})
        resume(api, target)
        log(
            f"x{n} pause {k + 1}: panel {shown or float('nan'):.0f} ms, status {statuses[-1]:.0f} ms"
        )
    load = meter.read()
    stop(sessions, api)
    latency, steps, minus = halts(sessions, since)
    return {"panel": panels, "status": statuses, "latency": latency, "step": steps,
            "minus": minus, "stages": desk_clients.pause_stages(sessions, since),
            "load": load}  # fmt: skip


def stop(sessions: list[int], api: desk_clients.Api) -> None:
    """Cancel them and wait until the worker has stopped them all."""
    for sid in sessions:
        with contextlib.suppress(desk_clients.ApiRefused):  # ended already
            api.call("POST", f"/sessions/{sid}/cancel", {})
    for sid in sessions:
        gateway_stack.wait_until(lambda sid=sid: status_of(sid) != "running", "the cancels")


# ---- watchers -------------------------------------------------------------------------------
def watched_run(stack, api: desk_clients.Api, clients: int, commits) -> dict:
    """One generation of TOKENS tokens with ``clients`` sockets on it, timed from its resume."""
    sid = start(api, 0, TOKENS, seed=7)
    api.call("POST", f"/sessions/{sid}/pause", {})  # at its start: the sockets connect meanwhile
    wait_status(sid, {"paused"})
    watchers = None
    if clients:
        cookie = gateway_stack.session_cookie(stack.reviewers[0])
        watchers = Watchers(stack.url, sid, cookie, clients)
        watchers.start()
        watchers.connected.wait(120)
        if watchers.error is not None:
            raise RuntimeError(f"the watchers could not connect: {watchers.error}")
        replayed = last_seq(sid)
        gateway_stack.wait_until(
            lambda: all(len(c) >= replayed for c in watchers.raw), "the replays", 60
        )
    resumed_at = last_seq(sid)
    api.call("POST", f"/sessions/{sid}/resume", {})
    wait_status(sid, {"generated"}, every=0.2)  # seldom: this process's clients share its GIL
    final = last_seq(sid)
    if watchers is not None:
        gateway_stack.wait_until(
            lambda: all(len(c) >= final for c in watchers.raw), "every event at every client", 60
        )
        watchers.stop()
    times = token_times([sid], {sid: resumed_at})
    run = {"tok_s": (len(times) - 1) / (times[-1] - times[0]), "complete": True}
    if watchers is not None:
        run |= arrivals(sid, watchers.messages(), resumed_at, final, commits.at)
    return run


def arrivals(
    sid: int, received: list[list[tuple[float, dict]]], after: int, final: int, committed: dict
) -> dict:
    """Each live token's delay at each client (those after ``after``: the replay excluded),
    from its commit and from its ``created_at``; the spread of one token's arrivals over the
    clients; whether every client received every event once, in order."""
    from reviewer.models import SessionEvent

    rows = SessionEvent.objects.filter(session_id=sid, type="token", seq__gt=after)
    created = {seq: at.timestamp() for seq, at in rows.values_list("seq", "created_at")}
    commit = {seq: committed[(sid, seq)] for seq in created}
    delays, from_created, complete = [], [], True
    by_seq: dict[int, list[float]] = {seq: [] for seq in created}
    for client in received:
        seqs = [m["seq"] for _, m in client if "seq" in m]
        complete = complete and seqs == list(range(1, final + 1))
        for at, message in client:
            if (seq := message.get("seq")) in created:
                delays.append(1000 * (at - commit[seq]))
                from_created.append(1000 * (at - created[seq]))
                by_seq[seq].append(at)
    spread = [1000 * (max(a) - min(a)) for a in by_seq.values() if a]
    return {"delays": delays, "from_created": from_created, "spread": spread, "complete": complete}


def watchers_phase(stack, api: desk_clients.Api, meter) -> dict:
    commits = desk_clients.Commits(os.environ["DATABASE_URL"])
    commits.start()
    runs: dict[int, list[dict]] = {0: [], CLIENTS: []}
    loads = []
    try:
        for r in range(ROUNDS):
            for clients in (0, CLIENTS) if r % 2 == 0 else (CLIENTS, 0):
                meter.start()
                runs[clients].append(watched_run(stack, api, clients, commits))
                loads.append({"clients": clients, **meter.read()})
                log(f"round {r} with {clients} watchers: {runs[clients][-1]['tok_s']:.2f} tok/s")
    finally:
        commits.stop()
    watched = runs[CLIENTS]

    def pooled(key: str) -> dict:
        values = [d for x in watched for d in x[key]]
        return {**percentiles(values), "max": round(max(values), 1)}

    tok_s = {str(c): round(statistics.median(x["tok_s"] for x in runs[c]), 2) for c in runs}
    ratios = pair_ratios([x["tok_s"] for x in runs[0]], [x["tok_s"] for x in watched])
    return {
        "clients": CLIENTS,
        "delay_ms": pooled("delays"),
        "tok_s_ratio": round(statistics.median(ratios), 3),
        "pair_ratios": [round(r, 3) for r in ratios],
        "tok_s": tok_s,
        "complete_in_order": all(x["complete"] for x in watched),
        "from_created_ms": pooled("from_created"),
        "spread_ms": pooled("spread"),
        "load": loads,
    }


def pair_ratios(unwatched: list[float], watched: list[float]) -> list[float]:
    """Each round's tokens/s watched over unwatched. The two runs of a round follow each other
    (in turns, either first), so the machine's other load, which drifts from round to round,
    weighs on both alike."""
    return [w / u for u, w in zip(unwatched, watched, strict=True)]


# ---- the report -----------------------------------------------------------------------------
def within(figures: dict, limit: float) -> bool:
    """Whether a p95 was measured and is at most ``limit`` (0 ms is within; none is not)."""
    return figures["p95"] is not None and figures["p95"] <= limit


def targets(report: dict) -> dict:
    met = {}
    for n in report["panel_ms"]:
        met[f"panel_p95_{n}_within_300ms"] = within(report["panel_ms"][n], 300)
        met[f"status_p95_{n}_within_250ms"] = within(report["status_ms"][n], 250)
        met[f"halt_minus_step_p95_{n}_within_20ms"] = within(report["halt_minus_step_ms"][n], 20)
    if (watchers := report.get("watchers")) is not None:
        met["watcher_delay_p95_within_25ms"] = watchers["delay_ms"]["p95"] <= 25
        met["tok_s_ratio_at_least_0.9"] = watchers["tok_s_ratio"] >= 0.9
        met["every_event_in_order"] = watchers["complete_in_order"]
    return {**met, "all": all(met.values())}


def main() -> None:
    report: dict = {"panel_ms": {}, "status_ms": {}, "halt_minus_step_ms": {}, "step_ms": {},
                    "latency_ms": {}, "halt_stages_ms": {}, "load": {}}  # fmt: skip
    with gateway_stack.running(prepare=desk_floor) as stack:
        from reviewer.web.auth import issue_token

        reviewer = stack.reviewers[0]
        api = desk_clients.Api(stack.url, issue_token(reviewer))
        daphne, worker = stack.processes
        meter = desk_clients.CpuMeter(
            {"daphne": daphne.pid, "worker": worker.pid, "bench": os.getpid()}
        )
        log("stack ready; warming up")
        warm = start(api, 0, 8)
        wait_status(warm, {"generated"})
        desk = None if WATCHERS_ONLY else desk_clients.Desk(stack.url, reviewer.username, PASSWORD)
        try:
            for n in CONCURRENCY if desk else ():
                phase = pause_phase(api, desk, n, meter)
                key = str(n)
                report["panel_ms"][key] = percentiles(phase["panel"])
                report["status_ms"][key] = percentiles(phase["status"])
                report["halt_minus_step_ms"][key] = percentiles(phase["minus"])
                report["step_ms"][key] = percentiles(phase["step"])
                report["latency_ms"][key] = percentiles(phase["latency"])
                report["halt_stages_ms"][key] = phase["stages"]
                report["load"][f"pauses_{key}"] = phase["load"]
        finally:
            if desk:
                desk.close()
        if not PAUSES_ONLY:
            report["watchers"] = watchers_phase(stack, api, meter)
            report["load"]["watchers"] = report["watchers"].pop("load")
    from django.conf import settings

    report["targets"] = targets(report)
    report["setup"] = {"quick": QUICK, "concurrency": list(CONCURRENCY), "pauses": PAUSES,
                       "clients": CLIENTS, "tokens": TOKENS, "rounds": ROUNDS,
                       "backend": settings.CAESURA_BACKEND,
                       "cpus": os.cpu_count()}  # fmt: skip
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
