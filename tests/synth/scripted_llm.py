"""A scripted chat LLM for the synth tests: a real ``ChatBackend`` whose replies are looked up
from the prompt (no weights), counting every call; ``Served`` puts it behind nrp's own
OpenAI-compatible server (``nrp.llm.server.create_app``) on 127.0.0.1, so the HTTP client, the
server and synth meet over real HTTP.

The test documents (``write_documents``): a folder with one Vietnamese document (passage
P0001 "Phở là", first in file-name order), one English document of two paragraphs (P0002
"Grey Hills", P0003 "Marlow grew"), and three bad files (empty, Latin-1, a PDF). ``REPLIES``
scripts the writer per (kind, passage) and ``JUDGE`` the support judge per answer, so each
filter has one known outcome (``EXPECTED``).
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

from nrp.llm.backends import ChatBackend, Completion, GenerationOptions, Messages

RIVER = (
    "The Alder River rises in the Grey Hills and flows 412 kilometres east to the port of "
    "Marlow. Its upper valley is known for beech forests and old stone bridges, several of "
    "which date from the fourteenth century. The river freezes in hard winters.\n"
    "Marlow grew around the river mouth as a fishing town. Today its harbour handles grain and "
    "timber, and a ferry crosses the estuary every hour in summer. The town museum holds a "
    "model of the first steam dredger used on the Alder.\n"
)
PHO = (
    "Phở là món ăn truyền thống của Việt Nam, gồm bánh phở, nước dùng và thịt bò hoặc thịt gà. "
    "Món ăn này xuất hiện ở miền Bắc vào đầu thế kỷ 20 và nay được bán khắp cả nước cũng như ở "
    "nhiều quốc gia khác.\n"
)
#: the passages' markers, in reading order
PASSAGES = {"Phở là": "P0001", "Grey Hills": "P0002", "Marlow grew": "P0003"}
#: how the prompt of each kind says what it wants
KIND_MARKERS = {
    "Read the two passages": "multi",
    "a fact stated in the passage": "factual",
    "yes/no question": "yesno",
    "Write one request": "instruction",
}

REPLIES = {
    ("factual", "P0002"): "Question: How long is the Alder River?\nAnswer: 412 kilometres.",
    ("factual", "P0003"): "   ",
    ("factual", "P0001"): "Question: What is pho made of?\nAnswer: Noodles, broth and beef.",
    ("yesno", "P0002"): "Question: Does the Alder River freeze?\nAnswer: Sometimes, in winter.",
    ("yesno", "P0003"): "Question: Is there a ferry in summer?\nAnswer: Yes, every hour.",
    ("yesno", "P0001"): "**Câu hỏi:** Phở có xuất hiện ở miền Bắc không?\n"
    "**Trả lời:** Có, vào đầu thế kỷ 20.",
    ("instruction", "P0002"): "Question: According to the passage, where does the Alder "
    "rise?\nAnswer: In the Grey Hills.",
    ("instruction", "P0003"): "Question: The town museum holds a model of the first steam "
    "dredger used on the Alder\nAnswer: A model of a steam dredger.",
    ("instruction", "P0001"): "Câu hỏi: Theo đoạn văn, phở gồm những gì?\n"
    "Trả lời: Bánh phở, nước dùng và thịt.",
    ("multi", "P0002+P0003"): "Question: How long is the Alder river??\nAnswer: 412 km",
}
#: the judge's reply per generated answer
JUDGE = {
    "412 kilometres.": "Label: TRUE\nConfidence: 0.9",
    "Yes, every hour.": "Label: TRUE\nConfidence: 0.3",
    "Có, vào đầu thế kỷ 20.": "Label: TRUE\nConfidence: 0.95",
    "Not in the passage.": "Label: NOT GIVEN\nConfidence: 0.9",
    "Wrong.": "Label: FALSE\nConfidence: 0.9",
}
#: item id -> (stage it is dropped at, or "kept"), for the default settings
EXPECTED = {
    "factual-P0001-0": "language",
    "factual-P0002-0": "kept",
    "factual-P0003-0": "parse",
    "yesno-P0001-0": "kept",
    "yesno-P0002-0": "parse",
    "yesno-P0003-0": "support",
    "instruction-P0001-0": "refers_to_text",
    "instruction-P0002-0": "refers_to_text",
    "instruction-P0003-0": "verbatim",
    "multi-P0002+P0003-0": "near_duplicate",
}


def write_documents(folder: Path) -> Path:
    """The test documents (module docstring) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "river.txt").write_text(RIVER, encoding="utf-8")
    (folder / "pho.md").write_text(PHO, encoding="utf-8")
    (folder / "empty.txt").write_text("  \n\n", encoding="utf-8")
    (folder / "latin1.txt").write_bytes("Café crème brûlée, ".encode("latin-1") * 20)
    (folder / "scan.pdf").write_bytes(b"%PDF-1.4 not read")
    return folder


class ScriptedLLM(ChatBackend):
    """Replies from ``REPLIES`` / ``JUDGE`` (an unknown prompt gets "I do not know."); ``calls``
    counts prompts answered; after ``fail_after`` calls every call raises (a killed run)."""

    kind = "scripted"
    concurrency = 1

    def __init__(self, fail_after: int | None = None):
        self.calls = 0
        self.fail_after = fail_after
        self.lock = threading.Lock()

    @property
    def model_name(self) -> str:
        return "scripted"

    def checksum(self) -> str:
        return "scripted-v1"

    def reply(self, prompt: str) -> str:
        if "Proposed answer:" in prompt:
            answer = prompt.split("Proposed answer:")[1].split("Reply in exactly")[0].strip()
            return JUDGE.get(answer, "I am not sure.")
        kind = next((k for marker, k in KIND_MARKERS.items() if marker in prompt), None)
        found = [uid for marker, uid in PASSAGES.items() if marker in prompt]
        return REPLIES.get((kind, "+".join(found)), "I do not know.")

    def _complete(self, messages: list[Messages], options: GenerationOptions):
        with self.lock:
            if self.fail_after is not None and self.calls + len(messages) > self.fail_after:
                raise RuntimeError("the scripted LLM was stopped")
            self.calls += len(messages)
        out = []
        for conversation in messages:
            text = self.reply(conversation[-1]["content"])
            completion = Completion(text, "stop", seed=options.seed)
            out.append([completion] * options.n)
        return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Served:
    """``backend`` behind ``nrp.llm.server.create_app`` on 127.0.0.1 (uvicorn in a thread);
    ``base_url`` ends in ``/v1``. A context manager."""

    def __init__(self, backend: ChatBackend, name: str = "scripted"):
        import uvicorn

        from nrp.llm.server import create_app

        self.port = free_port()
        config = uvicorn.Config(
            create_app(backend, name), host="127.0.0.1", port=self.port, log_level="warning"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> Served:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the scripted server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
