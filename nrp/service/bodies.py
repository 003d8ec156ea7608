"""Request bodies read strictly: JSON that Python's ``json`` would take but that means nothing
or cannot be written back is refused before a route sees it.

- a key twice in one object (``{"sample": 1, "sample": 2}``): ``json`` keeps the last silently;
- ``NaN``, ``Infinity`` and numbers beyond a float (``1e400``): not JSON, and a 422 that quoted
  them could not be serialised (a 500);
- a lone surrogate in a string (``"x\\ud800y"``, or encoded in the bytes): not Unicode; no
  file, table or response can hold it; a body that is not UTF-8;
- an integer of over 4,300 digits, or arrays and objects nested more than
  ``nrp.jsontext.MAX_DEPTH`` levels deep (the bound of every JSON nrp reads).

Each is a ``json.JSONDecodeError`` from ``StrictJSONRequest.json``, which FastAPI answers with
its own 422 (``json_invalid``, the reason under ``ctx.error``). Every router is made with
``route_class=StrictJSONRoute``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from nrp import engine, jsontext
from nrp.service.auth import authorize

# an escaped surrogate in the raw body: only then can a parsed string hold a lone one
_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class _Refused(ValueError):
    pass


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"number {text[:40]} is beyond the range of a float")
    return value


def _constant(text: str) -> float:
    raise _Refused(f"{text} is not a JSON value")


def _lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_lone_surrogate(k) or _lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_lone_surrogate(v) for v in value)
    return False


def _lone_surrogate_or_deep(value: Any) -> bool:
    try:
        return _lone_surrogate(value)
    except RecursionError:
        return True


def strict_loads(body: bytes | str) -> Any:
    """``json.loads`` that refuses what the module docstring lists (``json.JSONDecodeError``).
    Bytes must be UTF-8 (RFC 8259): ``json`` would also take a surrogate encoded in them."""
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    try:
        text = raw.decode("utf-8")
        value = jsontext.loads(
            text, object_pairs_hook=engine.unique_keys, parse_float=_float, parse_constant=_constant
        )
    except UnicodeDecodeError as err:
        raise json.JSONDecodeError(f"not UTF-8 at byte {err.start}", "", err.start) from None
    except (_Refused, engine.DuplicateKey) as err:
        raise json.JSONDecodeError(str(err), "", 0) from None
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", "", 0) from None
    except ValueError as err:  # an integer of over 4,300 digits
        if isinstance(err, json.JSONDecodeError):
            raise
        raise json.JSONDecodeError(str(err).split(";")[0][:200], "", 0) from None
    if _ESCAPED_SURROGATE.search(raw) and _lone_surrogate_or_deep(value):
        raise json.JSONDecodeError(
            "a string holds a lone surrogate (\\ud800-\\udfff): not valid Unicode", "", 0
        )
    return value


class StrictJSONRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = strict_loads(await self.body())
        return self._json


class StrictJSONRoute(APIRoute):
    """A route whose body is read with ``strict_loads``, after the token's scope is checked
    (authorization first: a token the route refuses learns a 403, not whether its body
    parses)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        scopes = [
            d.call.required_scope
            for d in self.dependant.dependencies
            if hasattr(d.call, "required_scope")
        ]

        async def strict(request: Request) -> Response:
            for scope in scopes:
                authorize(request, scope)
            return await handler(StrictJSONRequest(request.scope, request.receive))

        return strict
