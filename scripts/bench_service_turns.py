"""Cheap score requests beside an expensive one: what one client's costly request does to the
latency of everyone else's.

    python scripts/bench_service_turns.py                      # MEDIQA 2019 (or the demo)
    python scripts/bench_service_turns.py --duration 20 --expensive "dense:passages=16,stride=4"

The script starts ``nrp serve`` on a free loopback port over a collection ingested into a
temporary folder (``scripts/load_test.py``'s own server: MEDIQA 2019 from ../shared/data when it
is there, else the demo collection). ``--clients`` clients send cheap requests back to back
(``--cheap``, bm25 by default, one answer each), first alone for ``--duration`` seconds, then
for the same time beside each ``--expensive`` spec (``SPEC@N``: N answers): one more client
sends 64 answers (or N) of about 2,000 words (documents of the collection run together) with
that spec, again and again. Per
phase: the cheap requests' count, errors and latency p50/p99/max beside the alone phase's p99,
and what the expensive requests got (statuses, seconds). After each phase one cheap probe
measures how long the worker stays busy with work nobody waits for (``--score-timeout``, 30 s
here, is when an expensive request gets its 504).

The worker serves score requests in turns (docs/security.md, Deadlines and turns), so the
cheap requests wait for one slice of the expensive one at a time. ``--out FILE`` writes the
figures as JSON. Latencies depend on the CPU the processes get: compare the phases of one run.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_test import (
    Load,
    OwnServer,
    Target,
    _Clients,
    _Connection,
    _default_manifest,
    _texts,
    _warm_up,
)

#: SPEC@N: N answers of ``--words`` words (64 without @); the issue's three, then requests within
#: the default ``score_max_passages`` (4,096): 8 answers cut into 498 passages each, 2 into 2,000
EXPENSIVE = (
    "dense:passages=2,stride=1",
    "dense:passages=16,stride=4",
    "guard:calibrate=0.0321",
    "dense:passages=16,stride=4@8",
    "dense:passages=2,stride=1@2",
)


def _long_answers(texts: dict[str, list[str]], words: int, count: int) -> list[dict[str, Any]]:
    """``count`` answers of about ``words`` words: the texts of the chosen queries run together."""
    pool = " ".join(t for found in texts.values() for t in found).split()
    qids = sorted(texts)
    answers = []
    for n in range(count):
        start = (n * 97) % max(1, len(pool) - words)
        text = " ".join(pool[start : start + words]) if len(pool) >= words else " ".join(pool)
        answers.append({"answer_id": f"x{n}", "qid": qids[n % len(qids)], "text": f"{text} {n}"})
    return answers


class _Expensive(threading.Thread):
    """One client sending the expensive request again and again until ``stop`` is set."""

    def __init__(self, target: Target, spec: str, answers: list[dict[str, Any]]):
        super().__init__(name="expensive")
        self.target, self.spec, self.answers = target, spec, answers
        self.stop = threading.Event()
        self.replies: list[tuple[int, float]] = []  # status, seconds

    def run(self) -> None:
        connection = _Connection(self.target)
        connection.http.timeout = 600
        body = {"collection": self.target.collection, "rankers": self.spec, "answers": self.answers}
        try:
            while not self.stop.is_set():
                began = time.perf_counter()
                try:
                    status, _ = connection.post("/v1/score", body)
                except (OSError, http.client.HTTPException):
                    status = 0
                self.replies.append((status, round(time.perf_counter() - began, 1)))
        finally:
            connection.close()


def _phase(target: Target, cheap: str, texts, load: Load, spec: str | None, answers) -> dict:
    expensive = None
    if spec is not None:
        expensive = _Expensive(target, spec, answers)
        expensive.start()
        time.sleep(1.0)  # its first slice under way
    clients = _Clients(target, cheap, texts, load)
    elapsed, _, _ = clients.run()
    if expensive is not None:
        expensive.stop.set()
        expensive.join()
    probe = _Connection(target)
    began = time.perf_counter()
    one = [answers[0] | {"text": "x"}]
    status, _ = probe.post(
        "/v1/score", {"collection": target.collection, "rankers": cheap, "answers": one}
    )
    probe.close()
    ms = np.array([x for found in clients.latencies for x in found]) * 1000
    pct = (lambda q: round(float(np.percentile(ms, q)), 1)) if len(ms) else (lambda q: None)
    return {
        "beside": spec or "alone",
        "seconds": round(elapsed, 1),
        "cheap_requests": len(ms),
        "cheap_errors": dict(clients.errors),
        "p50_ms": pct(50),
        "p99_ms": pct(99),
        "max_ms": round(float(ms.max()), 1) if len(ms) else None,
        "expensive": dict(Counter(str(s) for s, _ in expensive.replies)) if expensive else {},
        "expensive_seconds": _spread([s for _, s in expensive.replies]) if expensive else {},
        "probe_after_ms": round((time.perf_counter() - began) * 1000, 1),
        "probe_status": status,
    }


def _spread(seconds: list[float]) -> dict[str, float]:
    """The expensive requests' round trips: median and longest (seconds)."""
    if not seconds:
        return {}
    return {"median": round(float(np.median(seconds)), 1), "max": round(max(seconds), 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--cheap", default="bm25")
    parser.add_argument("--expensive", action="append", help=f"default: {', '.join(EXPENSIVE)}")
    parser.add_argument("--words", type=int, default=2000)
    parser.add_argument("--score-timeout", type=float, default=30.0)
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    specs = args.expensive or list(EXPENSIVE)
    rows = []
    with tempfile.TemporaryDirectory(prefix="nrp-turns-") as folder:
        settings = {"score_timeout_s": args.score_timeout, "shutdown_timeout_s": 10}
        server = OwnServer(
            _default_manifest(), None, Path(folder), 0.0, args.torch_threads, settings
        )
        try:
            target = Target(server.url, server.token, server.collection, server.pids())
            texts = _texts(server.collection, Path(folder) / "indexes", 20, 0)
            _warm_up(target, args.cheap, texts)
            answers = _long_answers(texts, args.words, 64)
            load = Load(args.clients, args.duration, 10**9, 1, 0)
            for item in [None, *specs]:
                spec, _, count = (item or "").partition("@")
                chosen = answers[: int(count)] if count else answers
                row = _phase(target, args.cheap, texts, load, spec or None, chosen)
                row["beside"] = item or "alone"
                rows.append(row)
                alone = rows[0]["p99_ms"]
                print(
                    f"{row['beside']:<30} cheap {row['cheap_requests']:>5} requests, "
                    f"errors {row['cheap_errors'] or 0}, p50 {row['p50_ms']} ms, "
                    f"p99 {row['p99_ms']} ms (alone {alone}), max {row['max_ms']} ms; "
                    f"expensive {row['expensive'] or '-'} {row['expensive_seconds']}; "
                    f"probe after {row['probe_after_ms']} ms ({row['probe_status']})",
                    flush=True,
                )
        finally:
            server.stop()
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
