"""The socket between server and worker (``nrp.service.handle``).

- A frame the server writes is what ``multiprocessing.connection.Connection`` reads, and the
  server's reader takes the worker's frames in any chunking (one byte at a time, several at
  once, the long header of frames of 2 GiB and over).
- A worker killed the hard way: a new worker starts (the log says why) and the next request
  is served, its response the same bytes as before (a real server on loopback).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import time
from multiprocessing.connection import Connection

import httpx
import pytest
from service_helpers import ADMIN_TOKEN, READ_TOKEN, Server, pid_alive, write_config, write_synth

from nrp import ingest
from nrp.service.handle import _Frames, frame
from nrp.service.worker import Channel

MESSAGES = [
    ("result", {"id": "a", "rows": [[1.5, None, "x" * 5000]]}),
    ("metrics", {"kind": "score", "answers": 3}),
    ("ready", {"pid": 7, "text": "ünïcode"}),
]


def test_a_frame_of_the_server_is_what_a_connection_reads_and_the_reverse():
    ours, theirs = socket.socketpair()
    worker = Channel(Connection(theirs.detach()))
    try:
        for message in MESSAGES:
            ours.sendall(frame(message))
            assert worker.get(5) == message
            worker.put(message)
        received: list = []
        frames = _Frames(received.append, lambda: None)
        ours.settimeout(5)
        while len(received) < len(MESSAGES):
            frames.data_received(ours.recv(65536))
        assert received == MESSAGES
    finally:
        ours.close()
        worker.connection.close()


@pytest.mark.parametrize("chunk", [1, 7, 10_000])
def test_the_reader_takes_frames_in_any_chunking(chunk):
    data = b"".join(frame(message) for message in MESSAGES)
    received: list = []
    frames = _Frames(received.append, lambda: None)
    for start in range(0, len(data), chunk):
        frames.data_received(data[start : start + chunk])
    assert received == MESSAGES and not frames.buffer


def test_the_reader_takes_the_long_header():
    payload = frame(MESSAGES[1])[4:]
    long = struct.pack("!i", -1) + struct.pack("!Q", len(payload)) + payload
    received: list = []
    frames = _Frames(received.append, lambda: None)
    for byte in range(len(long)):
        frames.data_received(long[byte : byte + 1])
    assert received == [MESSAGES[1]]


def test_a_server_gone_reads_as_stop():
    ours, theirs = socket.socketpair()
    worker = Channel(Connection(theirs.detach()))
    ours.close()
    assert worker.get(5) == ("stop", {})
    worker.connection.close()


@pytest.mark.slow
def test_a_worker_killed_is_replaced_and_the_next_request_is_served(tmp_path):
    manifest = write_synth(tmp_path / "data")
    ingest(manifest, indexes_dir=tmp_path / "indexes")
    server = Server(write_config(tmp_path), tmp_path / "server.log").start()
    body = {"collection": "synth", "rankers": "bm25", "answers": [{"qid": "t0", "text": "fever"}]}
    try:
        with server.client(READ_TOKEN) as read:
            first = read.post("/v1/score", json=body)
            assert first.status_code == 200, first.text
            worker = server.worker_pid()
            os.kill(worker, signal.SIGKILL)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                ready = httpx.get(
                    f"{server.url}/readyz", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
                ).json()
                if ready.get("worker_pid") not in (None, worker) and ready["status"] == "ready":
                    break
                time.sleep(0.2)
            assert ready.get("worker_pid") not in (None, worker), ready
            again = read.post("/v1/score", json=body)
            assert again.status_code == 200, again.text
            assert again.content == first.content
        assert not pid_alive(worker)
    finally:
        assert server.stop() in (0, -signal.SIGTERM)
    log = [json.loads(line) for line in (tmp_path / "server.log").read_text().splitlines()
           if line.startswith("{")]  # fmt: skip
    assert ("server", "worker died; starting a new one") in [(e["process"], e["msg"]) for e in log]
