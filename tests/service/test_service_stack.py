"""``nrp serve``'s uvicorn stack: uvloop and httptools where they import, else asyncio and h11
(``nrp.service.app.server_stack``)."""

from __future__ import annotations

import importlib

from nrp.service import app as service_app


def test_the_stack_is_uvloop_and_httptools_where_they_import(monkeypatch):
    assert service_app.server_stack() == ("uvloop", "httptools")
    real = importlib.import_module

    def without(name: str, *args):
        if name in ("uvloop", "httptools"):
            raise ImportError(f"no {name}")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", without)
    assert service_app.server_stack() == ("asyncio", "h11")
