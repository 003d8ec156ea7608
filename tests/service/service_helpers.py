"""A hand-built collection and a real ``nrp serve`` in a subprocess on a free loopback port.

``write_synth`` writes a collection of ``N_TOPICS`` health-like topics with four judged
documents each (distinct real words per topic, so lexical rankers separate them) and one topic
without documents (its answers are skipped), plus an answer set of three answers per topic.
``Server`` starts ``python -m nrp serve --config FILE`` and waits for ``/readyz``; ``kill9``
kills it the hard way, ``stop`` sends SIGTERM and waits for a clean exit.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

import nrp

ADMIN_TOKEN = "admin-token-0123456789abcdef"
READ_TOKEN = "read-token-0123456789abcdef"
N_TOPICS = 30
WORDS = [
    "fever", "cough", "asthma", "insulin", "migraine", "allergy", "vaccine", "antibiotic",
    "cholesterol", "anemia", "eczema", "arthritis", "thyroid", "kidney", "liver", "ulcer",
    "sinus", "tonsil", "bronchitis", "hernia", "gout", "psoriasis", "measles", "mumps",
    "rubella", "malaria", "dengue", "rabies", "tetanus", "polio", "sepsis",
]  # fmt: skip
FILLERS = ["treatment", "symptoms", "doctor", "dose", "rest", "pain", "blood", "daily"]

MANIFEST = """\
name: synth
description: hand-built collection for the service tests
citation: nrp tests
data_root: .
repeated_judgments: {policy: error}
dimensions:
  relevance:
    description: relevant or not
    grades: {0: "not relevant", 1: "relevant", 2: "highly relevant"}
  readability:
    description: readable or not
    grades: {0: "hard", 1: "easy"}
sources:
  - {format: table, path: topics.tsv, holds: topics}
  - {format: table, path: documents.tsv, holds: documents}
  - {format: table, path: qrels.tsv, holds: judgments, dimensions: [relevance, readability]}
"""


def _doc_text(topic: int, doc: int) -> str:
    word = WORDS[topic]
    fillers = " ".join(FILLERS[(topic + doc + k) % len(FILLERS)] for k in range(doc + 1))
    return " ".join([word] * (4 - doc)) + f" {fillers} about {word}"


def answer_records() -> list[dict[str, Any]]:
    """Three answers per topic (two LLMs, one prompt), and one for the topic without
    documents."""
    records = []
    for topic in range(N_TOPICS):
        qid = f"t{topic}"
        word = WORDS[topic]
        texts = {
            ("good", 0): f"{word} {word} {word} treatment and rest for {word}",
            ("good", 1): f"{word} symptoms {word} doctor",
            ("weak", 0): f"see a doctor about {FILLERS[topic % len(FILLERS)]}",
        }
        for (llm, sample), text in texts.items():
            records.append(
                {"llm": llm, "prompt": "plain", "qid": qid, "sample": sample, "text": text}
            )
    records.append({"llm": "good", "prompt": "plain", "qid": "empty", "sample": 0, "text": "x y"})
    return records


def write_synth(folder: Path) -> Path:
    """The collection's files and ``answers.jsonl`` in ``folder``; the manifest's path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.yaml").write_text(MANIFEST)
    topics = ["qid\tquery"] + [f"t{t}\twhat helps with {WORDS[t]}" for t in range(N_TOPICS)]
    topics.append("empty\ta topic whose documents have no text")
    (folder / "topics.tsv").write_text("\n".join(topics) + "\n")
    docs = ["docno\ttext"]
    qrels = ["qid\tdocno\trelevance\treadability"]
    for topic in range(N_TOPICS):
        for doc in range(4):
            docno = f"t{topic}d{doc}"
            docs.append(f"{docno}\t{_doc_text(topic, doc)}")
            qrels.append(f"t{topic}\t{docno}\t{(3 - doc) // 2}\t{doc % 2}")
    qrels.append("empty\tnotext\t1\t1")
    (folder / "documents.tsv").write_text("\n".join(docs) + "\n")
    (folder / "qrels.tsv").write_text("\n".join(qrels) + "\n")
    with open(folder / "answers.jsonl", "w") as handle:
        for record in answer_records():
            handle.write(json.dumps(record) + "\n")
    return folder / "manifest.yaml"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_config(root: Path, **settings: Any) -> Path:
    """A tokens file (the read token stored as its SHA-256) and a config file under ``root``."""
    tokens = root / "tokens.txt"
    digest = hashlib.sha256(READ_TOKEN.encode()).hexdigest()
    tokens.write_text(f"# scope token\nadmin {ADMIN_TOKEN}\nread sha256:{digest}\n")
    config = {
        "indexes": str(root / "indexes"),
        "data_roots": [str(root / "data")],
        "tokens_file": str(tokens),
        "max_body_bytes": 200_000,
        "batch_max_size": 16,
        "batch_max_wait_ms": 2,
        "score_max_answers": 8,
        "poll_interval_s": 0.2,
        "shutdown_timeout_s": 20,
        **settings,
    }
    path = root / "service.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


class Server:
    """``nrp serve`` in a subprocess; ``client(token)`` gives an httpx client for it."""

    def __init__(self, config: Path, log: Path, cwd: Path | None = None, env: dict | None = None):
        self.config = config
        self.log = log
        self.cwd = cwd  # the server's working folder (default: the test's)
        self.env = env or {}  # variables set (a value) or removed (None) for the server
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 180.0) -> Server:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        # the nrp this test imports, wherever the server's working folder is
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(Path(nrp.__file__).parents[1]), env.get("PYTHONPATH")])
        )
        for name in ("NRP_TOKENS", "NRP_SERVICE_STORE", "NRP_INDEXES"):
            env.pop(name, None)
        for name, value in self.env.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        with open(self.log, "ab") as out:
            command = [sys.executable, "-m", "nrp", "serve", "--config", str(self.config)]
            self.process = subprocess.Popen(
                [*command, "--port", str(self.port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.cwd,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited: {self.log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"server not ready in {timeout} s: {self.log.read_text()[-3000:]}")

    def client(self, token: str | None = READ_TOKEN) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=120)

    def worker_pid(self) -> int:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}  # the pid is for admins only
        return int(httpx.get(f"{self.url}/readyz", headers=headers, timeout=5).json()["worker_pid"])

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self, timeout: float = 60.0) -> int:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
            raise


def wait_for_job(client: httpx.Client, job_id: str, timeout: float = 180.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] not in ("queued", "running"):
            return job
        time.sleep(0.2)
    raise TimeoutError(f"job {job_id} not finished in {timeout} s: {job}")


def all_rows(client: httpx.Client, job_id: str, table: str = "nrp", limit: int = 50) -> list:
    """Every row of a result table, page by page."""
    rows, offset = [], 0
    while offset is not None:
        page = client.get(
            f"/v1/jobs/{job_id}/results", params={"table": table, "offset": offset, "limit": limit}
        ).json()
        rows.extend(page["rows"])
        offset = page["next_offset"]
    return rows


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (dead, not yet reaped by its parent) is not alive
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
