"""Load test of ``POST /v1/score``: keep-alive clients on loopback, beside the in-process rate.

    python scripts/load_test.py                      # its own server, MEDIQA 2019 or the demo
    python scripts/load_test.py --ranker bm25 --answers 1 --answers 16 --duration 10
    python scripts/load_test.py --url http://127.0.0.1:8000 --token TOKEN --collection NAME \\
        --indexes DIR

Without ``--url`` the script ingests a collection into a temporary folder (MEDIQA 2019 from
``../shared/data`` when it is there, else the demo collection shipped in the package), starts
``nrp serve`` on a free 127.0.0.1 port with a fresh token, and stops it at the end. It only ever
talks to loopback (``--url`` must name 127.0.0.1, localhost or ::1).

A phase is one ranker and one request size (``--answers``; default 1 and 16). Each starts with a
warm-up that scores one answer for each of ``--queries`` queries drawn at random (the model
loads and their D_q's document scores enter the score cache, as on a server that has been
running). Then ``--clients`` client threads, each with one persistent HTTP/1.1 connection, send
requests back to back until ``--duration`` seconds have passed or ``--max-requests`` have been
sent in all. A request holds ``--answers`` answers: a judged document of another query with a
request number appended, so every text is new to the server. Measured by the client (round trip
included): requests, errors, requests/s, answers/s and latency p50/p95/p99/max in milliseconds.

Then, with the server idle, the **in-process rate** of the same requests in this process: the
library calls the worker makes for a request (``Positioner.position_rows`` over its answers and
``result_rows`` for its rows, through ``nrp.api``, one positioner kept across requests), one
request per call, for the requests the clients sent (at most ``--duration`` seconds); and those
answers again in one call (the library's rate when it gets them all at once). The ratio is the
service's answers/s over the in-process answers/s of one request per call. Goals, printed beside
the figures: p99 under 20 ms for one answer per request with a lexical ranker at 8 clients, and a
ratio of at least 1.0 with 16 answers per request. ``--out FILE`` writes every figure as JSON.

Rates depend on the CPU the processes get; on a machine shared with other work they move from
run to run. CPU time does not: with its own server the script also reports the CPU milliseconds
per request of the server and worker processes (Linux), of the clients, and of the in-process
run, and the CPU ratio (in-process CPU over service CPU per answer), which is the rate ratio
the service would reach with the CPU to itself, clients aside.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
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
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import numpy as np

from nrp.service.config import ServiceConfig

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
GOAL_P99_MS = 20.0  # one answer per request, lexical ranker, 8 clients
GOAL_RATIO = 1.0  # 16 answers per request: service answers/s over the in-process rate
GOAL_RATIO_ANSWERS = 16


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
        self,
        manifest: Path,
        name: str | None,
        workdir: Path,
        batch_wait_ms: float,
        threads: int,
        settings: dict[str, Any] | None = None,
    ):
        import nrp
        from nrp import ingest

        self.workdir = workdir
        self.token = secrets.token_hex(16)
        self.admin_token = secrets.token_hex(16)  # /readyz names the worker's pid to admins only
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
                    **(settings or {}),
                }
            )
        )
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {
            **os.environ,
            "NRP_TOKENS": f"read:{self.token},admin:{self.admin_token}",
            "HF_HUB_OFFLINE": "1",
        }
        env["TRANSFORMERS_OFFLINE"] = "1"
        # the server runs the nrp this script imports (the in-process run's), whatever the
        # working folder: ``python -m`` would put the working folder first
        here = str(Path(nrp.__file__).parents[1])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [here, env.get("PYTHONPATH")]))
        self.log = open(workdir / "server.log", "wb")  # noqa: SIM115 - closed in stop()
        command = [sys.executable, "-m", "nrp", "serve", "--config", str(config)]
        self.process = subprocess.Popen(
            [*command, "--port", str(self.port)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=workdir,
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

    def pids(self) -> tuple[int, ...]:
        """The server process and its worker's."""
        headers = {"Authorization": f"Bearer {self.admin_token}"}
        worker = (
            httpx.get(f"{self.url}/readyz", headers=headers, timeout=5).json().get("worker_pid")
        )
        return (self.process.pid, *([int(worker)] if worker else []))

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
    """The server under test, the collection its requests name, and the ids of its processes
    (server and worker, when this script started it: their CPU time is read)."""

    url: str
    token: str
    collection: str
    pids: tuple[int, ...] = ()


def _cpu_seconds(pids: tuple[int, ...]) -> float | None:
    """User + system CPU seconds the processes used so far (Linux /proc; None elsewhere)."""
    if not pids:
        return None
    total = 0.0
    try:
        for pid in pids:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    return total


@dataclass(frozen=True)
class Load:
    """One phase's load: ``clients`` sending requests of ``answers`` answers back to back for
    ``duration`` seconds or until ``max_requests`` in all; ``seed`` draws the answers."""

    clients: int
    duration: float
    max_requests: int
    answers: int
    seed: int


def _answers(texts: dict[str, list[str]], load: Load, number: int) -> Iterator[list[dict]]:
    """The answers of client ``number``'s requests, one list per request, always the same for
    the same seed (the in-process run scores the very answers the clients sent)."""
    rng = random.Random(load.seed * 1000 + number)
    qids = sorted(texts)
    for sent in itertools.count(1):
        chosen = [rng.choice(qids) for _ in range(load.answers)]
        yield [
            {
                "answer_id": f"c{number}-{sent}-{k}",
                "qid": q,
                "text": f"{rng.choice(texts[q])} {number}-{sent}-{k}",
            }
            for k, q in enumerate(chosen)
        ]


class _Connection:
    """One persistent HTTP/1.1 connection to the server, reopened after an error."""

    def __init__(self, target: Target):
        address = urlparse(target.url)
        self.host, self.port = address.hostname or "127.0.0.1", address.port or 80
        self.headers = {
            "Authorization": f"Bearer {target.token}",
            "Content-Type": "application/json",
        }
        self.http = http.client.HTTPConnection(self.host, self.port, timeout=120)

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        try:
            self.http.request("POST", path, json.dumps(body).encode(), self.headers)
            response = self.http.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException):
            self.close()
            self.http = http.client.HTTPConnection(self.host, self.port, timeout=120)
            raise

    def close(self) -> None:
        self.http.close()


def _warm_up(target: Target, ranker: str, texts: dict[str, list[str]]) -> None:
    """Every query once (model load, D_q scores into the score cache)."""
    qids = sorted(texts)
    connection = _Connection(target)
    try:
        for start in range(0, len(qids), 32):
            chunk = qids[start : start + 32]
            answers = [
                {"answer_id": f"w{n}", "qid": q, "text": texts[q][0]} for n, q in enumerate(chunk)
            ]
            status, data = connection.post("/v1/score", _body(target, ranker, answers))
            if status != 200:
                raise SystemExit(f"warm-up failed: {status} {data[:300].decode(errors='replace')}")
    finally:
        connection.close()


def _body(target: Target, ranker: str, answers: list[dict]) -> dict[str, Any]:
    return {"collection": target.collection, "rankers": ranker, "answers": answers}


class _Clients:
    """The client threads of one phase and what they measured: latencies of the answered
    requests (s), errors by status, and how many requests each client sent."""

    def __init__(self, target: Target, ranker: str, texts: dict[str, list[str]], load: Load):
        self.target, self.ranker, self.texts, self.load = target, ranker, texts, load
        self.latencies: list[list[float]] = [[] for _ in range(load.clients)]
        self.sent = [0] * load.clients
        self.errors: Counter[str] = Counter()
        self.tickets = itertools.count()  # next() is atomic: the shared request budget
        self.deadline = 0.0

    def run(self) -> tuple[float, float | None, float]:
        """All clients until the deadline or the request limit: the seconds it took, the CPU
        seconds of the server's processes and of this process (the clients) meanwhile."""
        server_cpu, client_cpu = _cpu_seconds(self.target.pids), time.process_time()
        self.deadline = time.monotonic() + self.load.duration
        threads = [
            threading.Thread(target=self._client, args=(n,), name=f"client-{n}")
            for n in range(self.load.clients)
        ]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        server_after = _cpu_seconds(self.target.pids)
        server = None if server_cpu is None or server_after is None else server_after - server_cpu
        return elapsed, server, time.process_time() - client_cpu

    def _client(self, number: int) -> None:
        """Client ``number``: requests back to back on one connection."""
        connection = _Connection(self.target)
        answers = _answers(self.texts, self.load, number)
        latencies = self.latencies[number]
        try:
            while time.monotonic() < self.deadline and next(self.tickets) < self.load.max_requests:
                body = _body(self.target, self.ranker, next(answers))
                self.sent[number] += 1
                began = time.perf_counter()
                try:
                    status, _ = connection.post("/v1/score", body)
                except (OSError, http.client.HTTPException) as err:
                    self.errors[type(err).__name__] += 1
                    continue
                if status == 200:
                    latencies.append(time.perf_counter() - began)
                else:
                    self.errors[str(status)] += 1
        finally:
            connection.close()

    def requests(self) -> Iterator[list[dict]]:
        """The answers of every request sent, the clients' requests taken in turn."""
        streams = [
            itertools.islice(_answers(self.texts, self.load, n), sent)
            for n, sent in enumerate(self.sent)
        ]
        for answers in itertools.chain.from_iterable(itertools.zip_longest(*streams)):
            if answers is not None:
                yield answers


class InProcess:
    """The library calls the worker makes for a score request, in this process: positions by a
    ``Positioner`` kept across requests (``position_rows``), rows by ``result_rows``."""

    def __init__(self, indexes: Path, collection: str, spec: str):
        from nrp import api, engine

        self.api, self.engine = api, engine
        self.collection = api.Collection.load(collection, indexes)
        ranker = api.make_ranker(spec)
        ranker.bind_collection(self.collection)
        self.lexical = type(ranker).__module__.startswith("nrp.rankers.lexical")
        self.spec = ranker.spec()
        job = engine.PositionJob(
            self.collection,
            ranker,
            ranker.fingerprint(),
            engine.PositionOptions(),
            engine.PositionCaches.beside(self.collection),
            self.collection.candidates(),
        )
        self.positioner = engine.Positioner(job)
        self.dimensions = list(self.collection.dimensions)
        self.weight_of = engine.normalised_weights(None, self.dimensions)

    def score(self, answers: list[dict]) -> list[list]:
        """``RESULT_COLUMNS`` rows of ``answers`` (what ``POST /v1/score`` answers), by the
        calls the worker makes: ``position_rows``, then ``result_rows``."""
        records = [{"llm": "", "prompt": "", "sample": 0, **a} for a in answers]
        found = self.positioner.position_rows(
            [a["answer_id"] for a in answers], [a["qid"] for a in answers],
            [a["text"] for a in answers],
        )  # fmt: skip
        positions = {d: (self.spec, found) for d in self.dimensions}
        return self.engine.result_rows(records, positions, "mid", self.weight_of)

    def rates(self, requests: Iterator[list[dict]], seconds: float) -> dict[str, Any]:
        """Answers/s of ``requests`` scored one request per call (for at most ``seconds``),
        and of the same answers in one call."""
        done: list[list[dict]] = []
        started, cpu = time.perf_counter(), time.process_time()
        for answers in requests:
            self.score(answers)
            done.append(answers)
            if time.perf_counter() - started > seconds:
                break
        per_request, cpu = time.perf_counter() - started, time.process_time() - cpu
        every = [a for answers in done for a in answers]
        started = time.perf_counter()
        if every:
            self.score(every)
        one_call = time.perf_counter() - started
        return {
            "requests": len(done),
            "answers": len(every),
            "answers_per_s": round(len(every) / per_request, 1) if done else None,
            "one_call_answers_per_s": round(len(every) / one_call, 1) if every else None,
            "cpu_ms_per_answer": round(cpu * 1000 / len(every), 3) if every else None,
        }


def _phase(
    target: Target, ranker: str, texts: dict[str, list[str]], load: Load, indexes: Path
) -> dict[str, Any]:
    """One phase: the clients against the server, then the same requests in process."""
    _warm_up(target, ranker, texts)
    clients = _Clients(target, ranker, texts, load)
    elapsed, server_cpu, client_cpu = clients.run()
    in_process = InProcess(indexes, target.collection, ranker)
    in_process.score([{"answer_id": f"w{n}", "qid": q, "text": texts[q][0]}
                      for n, q in enumerate(sorted(texts))])  # fmt: skip
    rates = in_process.rates(clients.requests(), load.duration)
    cpu = {"server": server_cpu, "clients": client_cpu}
    return _report(ranker, load, clients, (elapsed, cpu), rates, in_process.lexical)


def _report(
    ranker: str,
    load: Load,
    clients: _Clients,
    times: tuple[float, dict[str, float | None]],
    in_process: dict[str, Any],
    lexical: bool,
) -> dict[str, Any]:
    """Throughput, latency percentiles (ms, client side), CPU per request, the in-process
    rates and the ratios, with the goals that apply to this phase."""
    elapsed, cpu = times
    latencies = [x for client in clients.latencies for x in client]
    sent = max(sum(clients.sent), 1)
    per_request = {k: None if v is None else round(v * 1000 / sent, 3) for k, v in cpu.items()}
    server_per_answer = (
        None if cpu["server"] is None else cpu["server"] * 1000 / sent / load.answers
    )
    inner_cpu = in_process["cpu_ms_per_answer"]
    ms = np.array(latencies) * 1000
    pct = (lambda q: round(float(np.percentile(ms, q)), 2)) if len(ms) else (lambda q: None)
    answers_per_s = len(latencies) * load.answers / elapsed
    reference = in_process["answers_per_s"]
    return {
        "ranker": ranker,
        "clients": load.clients,
        "answers_per_request": load.answers,
        "seconds": round(elapsed, 2),
        "requests": len(latencies),
        "errors": dict(clients.errors),
        "requests_per_s": round(len(latencies) / elapsed, 1),
        "answers_per_s": round(answers_per_s, 1),
        "p50_ms": pct(50),
        "p95_ms": pct(95),
        "p99_ms": pct(99),
        "max_ms": round(float(ms.max()), 2) if len(ms) else None,
        "in_process": in_process,
        "ratio": round(answers_per_s / reference, 3) if reference else None,
        "cpu_ms_per_request": per_request,  # server and worker together; the clients
        "cpu_ratio": round(inner_cpu / server_per_answer, 3)
        if inner_cpu and server_per_answer
        else None,
        "goal_p99_ms": GOAL_P99_MS if lexical and load.answers == 1 else None,
        "goal_ratio": GOAL_RATIO if load.answers == GOAL_RATIO_ANSWERS else None,
    }


def _goal(value: float | None, goal: float | None, below: bool) -> str:
    """`` (goal < 20: met)`` or `` (goal >= 1: missed)``; nothing without a goal."""
    if goal is None or value is None:
        return ""
    met = value < goal if below else value >= goal
    return f" (goal {'<' if below else '>='} {goal:g}: {'met' if met else 'missed'})"


def _print(collection: str, result: dict[str, Any]) -> None:
    r, inner = result, result["in_process"]
    errors = sum(r["errors"].values())
    print(
        f"{r['ranker']}, {r['answers_per_request']} answer(s)/request, {r['clients']} clients, "
        f"{r['seconds']} s on {collection}: {r['requests']} requests, {errors} errors"
    )
    print(f"  service      {r['requests_per_s']} requests/s, {r['answers_per_s']} answers/s")
    print(
        f"  latency ms   p50 {r['p50_ms']}  p95 {r['p95_ms']}  "
        f"p99 {r['p99_ms']}{_goal(r['p99_ms'], r['goal_p99_ms'], True)}  max {r['max_ms']}"
    )
    print(
        f"  in-process   {inner['answers_per_s']} answers/s one request per call "
        f"({inner['requests']} requests); {inner['one_call_answers_per_s']} answers/s in one call"
    )
    print(f"  ratio        {r['ratio']}{_goal(r['ratio'], r['goal_ratio'], False)}")
    cpu = r["cpu_ms_per_request"]
    if cpu["server"] is not None:
        per_request = inner["cpu_ms_per_answer"] * r["answers_per_request"]
        print(
            f"  cpu ms/req   server+worker {cpu['server']}, clients {cpu['clients']}; "
            f"in process {round(per_request, 3)}; cpu ratio {r['cpu_ratio']}"
        )


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
        "--duration", type=float, default=10.0, help="seconds per phase (default 10)"
    )
    parser.add_argument(
        "--max-requests", type=int, default=20_000, help="requests per phase at most"
    )
    parser.add_argument(
        "--answers", type=int, action="append", help="answers per request (repeat; default 1, 16)"
    )
    parser.add_argument(
        "--queries", type=int, default=30, help="queries the answers are drawn for (default 30)"
    )
    wait = ServiceConfig.batch_max_wait_ms
    parser.add_argument("--batch-wait-ms", type=float, default=wait, help="own server's wait")
    parser.add_argument(
        "--torch-threads", type=int, default=0, help="own server's torch_threads (0: default)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="write the results as JSON")
    args = parser.parse_args()
    sizes = args.answers or [1, GOAL_RATIO_ANSWERS]
    if min(args.clients, *sizes, args.max_requests, args.queries) < 1 or args.duration <= 0:
        parser.error("--clients, --duration, --answers, --max-requests and --queries must be > 0")
    if args.duration > 600:
        parser.error("--duration is at most 600 seconds per phase (the test must stop)")
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
            pids: tuple[int, ...] = ()
        else:
            manifest = args.manifest or _default_manifest()
            print(f"ingesting {manifest} and starting nrp serve ...", file=sys.stderr)
            server = OwnServer(manifest, None, workdir, args.batch_wait_ms, args.torch_threads)
            url, token, collection = server.url, server.token, server.collection
            pids = server.pids()
            indexes = workdir / "indexes"
        texts = _texts(collection, indexes, args.queries, args.seed)
        assert indexes is not None  # _texts stops without it
        results = []
        for ranker, size in itertools.product(rankers, sizes):
            print(f"{ranker}, {size} answer(s)/request: warm-up, then {args.clients} clients x "
                  f"{args.duration} s, then in process ...", file=sys.stderr)  # fmt: skip
            load = Load(args.clients, args.duration, args.max_requests, size, args.seed)
            target = Target(url, token, collection, pids)
            result = _phase(target, ranker, texts, load, indexes)
            _print(collection, result)
            results.append(result)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    if args.out:
        cores = os.cpu_count()
        args.out.write_text(
            json.dumps({"collection": collection, "cpu_count": cores, "results": results}, indent=1)
        )
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
