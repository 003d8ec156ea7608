"""Load test of ``POST /v1/score``: N concurrent clients on loopback for T seconds per ranker.

    python scripts/load_test.py                      # its own server, MEDIQA 2019 or the demo
    python scripts/load_test.py --clients 16 --duration 20 --ranker bm25 --ranker dense
    python scripts/load_test.py --url http://127.0.0.1:8000 --token TOKEN --collection NAME

Without ``--url`` the script ingests a collection into a temporary folder (MEDIQA 2019 from
``../shared/data`` when it is there, else the demo collection shipped in the package), starts
``nrp serve`` on a free 127.0.0.1 port with a fresh token, and stops it at the end. It only ever
talks to loopback (``--url`` must name 127.0.0.1, localhost or ::1).

Per ranker: a warm-up that scores one answer for each of ``--queries`` queries drawn at random
(the model loads and their D_q's document scores enter the score cache, as on a server that has
been running), then ``--clients``
clients each send requests back to back until ``--duration`` seconds have passed or
``--max-requests`` have been sent in all. Each request holds ``--answers`` answers: a judged
document of another query with a request number appended, so every text is new to the server.
Reported: requests, errors, throughput (requests/s and answers/s) and latency p50/p95/p99/max in
milliseconds, measured by the client (HTTP round trip included). ``--out FILE`` writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _default_manifest() -> Path:
    mediqa = ROOT / "manifests" / "mediqa-2019.yaml"
    if (SHARED / "mediqa-2019").is_dir():
        return mediqa
    return ROOT / "nrp" / "data" / "demo" / "manifest.yaml"


class OwnServer:
    """``nrp serve`` on a free loopback port over a collection ingested into a temp folder."""

    def __init__(
        self, manifest: Path, name: str | None, workdir: Path, batch_wait_ms: float, threads: int
    ):
        from nrp import ingest

        self.workdir = workdir
        self.token = secrets.token_hex(16)
        indexes = workdir / "indexes"
        result = ingest(manifest, name, indexes)
        self.collection = result.name
        config = workdir / "service.yaml"
        config.write_text(
            json.dumps(
                {
                    "indexes": str(indexes),
                    "log_level": "warning",
                    "batch_max_wait_ms": batch_wait_ms,
                    "score_max_answers": 64,
                    "torch_threads": threads,
                }
            )
        )
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "NRP_TOKENS": f"read:{self.token}", "HF_HUB_OFFLINE": "1"}
        env["TRANSFORMERS_OFFLINE"] = "1"
        self.log = open(workdir / "server.log", "wb")  # noqa: SIM115 - closed in stop()
        command = [sys.executable, "-m", "nrp", "serve", "--config", str(config)]
        self.process = subprocess.Popen(
            [*command, "--port", str(self.port)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"server exited; see {workdir / 'server.log'}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        self.stop()
        raise SystemExit("server not ready in 300 s")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.log.close()


def _texts(collection: str, indexes: Path | None, queries: int, seed: int) -> dict[str, list[str]]:
    """qid -> texts to send for it (documents of other queries), for ``queries`` queries with
    documents drawn at random (all when there are fewer)."""
    if indexes is None:
        raise SystemExit("--url needs --indexes to read the collection's queries and documents")
    from nrp import Collection

    candidates = Collection.load(collection, indexes).candidates()
    by_qid = candidates.groupby(candidates["qid"].astype(str))["text"].apply(list).to_dict()
    qids = sorted(by_qid)
    chosen = sorted(random.Random(seed).sample(qids, min(queries, len(qids))))
    return {
        qid: [t for other in qids if other != qid for t in by_qid[other][:1]][:50] for qid in chosen
    }


@dataclass(frozen=True)
class Target:
    """The server under test and the collection its requests name."""

    url: str
    token: str
    collection: str


@dataclass(frozen=True)
class Load:
    """One phase's load: ``clients`` sending requests of ``answers`` answers back to back for
    ``duration`` seconds or until ``max_requests`` in all; ``seed`` draws the answers."""

    clients: int
    duration: float
    max_requests: int
    answers: int
    seed: int


async def _phase(
    target: Target, ranker: str, texts: dict[str, list[str]], load: Load
) -> dict[str, object]:
    headers = {"Authorization": f"Bearer {target.token}"}
    limits = httpx.Limits(max_connections=load.clients, max_keepalive_connections=load.clients)
    async with httpx.AsyncClient(
        base_url=target.url, headers=headers, timeout=120, limits=limits
    ) as http:
        await _warm_up(http, target.collection, ranker, texts)
        clients = _Clients(http, target.collection, ranker, texts, load)
        started = time.perf_counter()
        await asyncio.gather(*(clients.run(n) for n in range(load.clients)))
        elapsed = time.perf_counter() - started
    return _report(ranker, load, clients, elapsed)


async def _warm_up(
    http: httpx.AsyncClient, collection: str, ranker: str, texts: dict[str, list[str]]
) -> None:
    """Every query once (model load, D_q scores into the score cache)."""
    qids = sorted(texts)
    for start in range(0, len(qids), 32):
        chunk = qids[start : start + 32]
        body = {
            "collection": collection,
            "rankers": ranker,
            "answers": [
                {"answer_id": f"w{n}", "qid": q, "text": texts[q][0]} for n, q in enumerate(chunk)
            ],
        }
        response = await http.post("/v1/score", json=body)
        if response.status_code != 200:
            raise SystemExit(f"warm-up failed: {response.status_code} {response.text[:300]}")


class _Clients:
    """The clients of one phase and what they measured: latencies of the answered requests (s),
    errors by status, requests sent."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        collection: str,
        ranker: str,
        texts: dict[str, list[str]],
        load: Load,
    ):
        self.http, self.collection, self.ranker = http, collection, ranker
        self.texts, self.load, self.qids = texts, load, sorted(texts)
        self.latencies: list[float] = []
        self.errors: dict[str, int] = {}
        self.sent = 0
        self.deadline = time.monotonic() + load.duration

    async def run(self, number: int) -> None:
        """Client ``number``: requests back to back until the deadline or the request limit."""
        load = self.load
        rng = random.Random(load.seed * 1000 + number)
        while time.monotonic() < self.deadline and self.sent < load.max_requests:
            self.sent += 1
            sent = self.sent
            chosen = [rng.choice(self.qids) for _ in range(load.answers)]
            body = {
                "collection": self.collection,
                "rankers": self.ranker,
                "answers": [
                    {
                        "answer_id": f"c{number}-{sent}-{k}",
                        "qid": q,
                        "text": f"{rng.choice(self.texts[q])} {number}-{sent}-{k}",
                    }
                    for k, q in enumerate(chosen)
                ],
            }
            began = time.perf_counter()
            try:
                response = await self.http.post("/v1/score", json=body)
                status = str(response.status_code)
            except httpx.HTTPError as err:
                status = type(err).__name__
            if status == "200":
                self.latencies.append(time.perf_counter() - began)
            else:
                self.errors[status] = self.errors.get(status, 0) + 1


def _report(ranker: str, load: Load, clients: _Clients, elapsed: float) -> dict[str, object]:
    """Throughput and latency percentiles (ms, client side) of one phase."""
    latencies = clients.latencies
    ms = np.array(latencies) * 1000
    pct = (lambda q: round(float(np.percentile(ms, q)), 2)) if len(ms) else (lambda q: None)
    return {
        "ranker": ranker,
        "clients": load.clients,
        "answers_per_request": load.answers,
        "seconds": round(elapsed, 2),
        "requests": len(latencies),
        "errors": clients.errors,
        "requests_per_s": round(len(latencies) / elapsed, 1),
        "answers_per_s": round(len(latencies) * load.answers / elapsed, 1),
        "p50_ms": pct(50),
        "p95_ms": pct(95),
        "p99_ms": pct(99),
        "max_ms": round(float(ms.max()), 2) if len(ms) else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running server (loopback only); default: start one")
    parser.add_argument("--token", help="read token for --url")
    parser.add_argument("--collection", help="collection name (with --url)")
    parser.add_argument("--indexes", type=Path, help="indexes folder of --url's collections")
    parser.add_argument("--manifest", type=Path, help="collection to serve (default: MEDIQA/demo)")
    parser.add_argument(
        "--ranker", action="append", help="ranker spec (repeat; default bm25 and dense)"
    )
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (default 8)")
    parser.add_argument(
        "--duration", type=float, default=10.0, help="seconds per ranker (default 10)"
    )
    parser.add_argument(
        "--max-requests", type=int, default=20_000, help="requests per ranker at most"
    )
    parser.add_argument("--answers", type=int, default=1, help="answers per request (default 1)")
    parser.add_argument(
        "--queries", type=int, default=30, help="queries the answers are drawn for (default 30)"
    )
    parser.add_argument("--batch-wait-ms", type=float, default=5.0, help="own server's max wait")
    parser.add_argument(
        "--torch-threads", type=int, default=0, help="own server's torch_threads (0: default)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="write the results as JSON")
    args = parser.parse_args()
    if min(args.clients, args.answers, args.max_requests, args.queries) < 1 or args.duration <= 0:
        parser.error("--clients, --duration, --answers, --max-requests and --queries must be > 0")
    if args.duration > 600:
        parser.error("--duration is at most 600 seconds per ranker (the test must stop)")
    rankers = args.ranker or ["bm25", "dense"]
    server = None
    workdir = Path(tempfile.mkdtemp(prefix="nrp-load-"))
    try:
        if args.url:
            host = urlparse(args.url).hostname or ""
            if host not in LOOPBACK:
                parser.error("--url must be a loopback address (127.0.0.1, localhost, ::1)")
            if not args.token or not args.collection:
                parser.error("--url needs --token and --collection")
            url, token, collection, indexes = args.url, args.token, args.collection, args.indexes
        else:
            manifest = args.manifest or _default_manifest()
            print(f"ingesting {manifest} and starting nrp serve ...", file=sys.stderr)
            server = OwnServer(manifest, None, workdir, args.batch_wait_ms, args.torch_threads)
            url, token, collection = server.url, server.token, server.collection
            indexes = workdir / "indexes"
        texts = _texts(collection, indexes, args.queries, args.seed)
        results = []
        for ranker in rankers:
            print(f"{ranker}: warm-up, then {args.clients} clients x {args.duration} s ...",
                  file=sys.stderr)  # fmt: skip
            load = Load(args.clients, args.duration, args.max_requests, args.answers, args.seed)
            phase = _phase(Target(url, token, collection), ranker, texts, load)
            results.append(asyncio.run(phase))
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    header = f"{'ranker':<12}{'req':>7}{'err':>5}{'req/s':>9}{'p50 ms':>9}{'p95 ms':>9}"
    print(f"collection {collection}, {args.clients} clients, {args.answers} answer(s)/request")
    print(header + f"{'p99 ms':>9}{'max ms':>9}")
    for r in results:
        print(
            f"{r['ranker']:<12}{r['requests']:>7}{sum(r['errors'].values()):>5}"
            f"{r['requests_per_s']:>9}{r['p50_ms']:>9}{r['p95_ms']:>9}{r['p99_ms']:>9}"
            f"{r['max_ms']:>9}"
        )
    if args.out:
        args.out.write_text(json.dumps({"collection": collection, "results": results}, indent=1))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
