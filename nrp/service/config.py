"""Settings of ``nrp serve``: where data may be read from, where state lives, who may call.

Settings come from, in increasing precedence: the defaults below, a config file (YAML or TOML,
``--config``), environment variables (``NRP_TOKENS``, ``NRP_SERVICE_STORE``, ``NRP_EXECUTOR``,
``NRP_RAY_ADDRESS``; ``NRP_INDEXES`` only when the file names no ``indexes``, as for the other
commands) and command-line options.
Every unknown key or bad value is a ``ConfigError`` naming the file and key, so a typo never
silently falls back to a default.

Choices, and why:

- **Tokens required by default.** A service that scores answers can also ingest files of the
  server: an open port must not do that. ``auth: false`` turns checking off explicitly (local
  use only). Two scopes: ``admin`` (ingest, submit and cancel jobs) and ``read`` (everything
  that only reads: collections, jobs, results, leaderboard, metrics, and ``POST /v1/score``,
  which computes from cached scores and stores nothing). A token may be written as
  ``sha256:HEX`` (the SHA-256 of the token) so that the tokens file need not hold secrets.
- **Data roots.** Paths in requests (manifests, answer files, model folders in ranker specs) are
  relative to one of the configured data roots and must stay inside it after symbolic links are
  resolved; without data roots no request can name a server file at all.
- **Store.** SQLite in WAL mode beside the indexes by default (one server); a ``postgresql://``
  URL for a store that several servers share.
- **Batching.** The worker groups work from all jobs and synchronous requests per ranker:
  ``batch_max_size`` answers per model call at most, waiting up to ``batch_max_wait_ms`` for a
  synchronous batch to fill. ``batch_delay_ms`` sleeps after every job batch: it exists for
  tests that need a job to stay in flight (kill -9 mid-job), never for production.
- **Executor.** ``executor: ray`` (with ``ray_address``, else ``$RAY_ADDRESS``, else a Ray
  instance started by the worker) runs job units on a Ray cluster (``nrp.service.worker``);
  ``local`` (the default) runs them in the worker process. ``ray_address`` without ``ray`` is
  an error rather than ignored: it says the operator meant to use a cluster. Not
  ``$RAY_ADDRESS`` for the setting itself: a shell that has it set for other Ray work must not
  make a local service refuse to start.
- **CPU threads.** ``torch_threads`` caps the worker's intra-op threads. On a machine whose cores
  other processes also use, torch's default (one thread per core) makes its threads wait for
  each other: one MiniLM forward measured 400 ms with 2 threads against 50 ms with 1 on a busy
  2-core machine. 0 keeps torch's default (right for a machine of its own).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from nrp import api
from nrp.errors import ConfigError

SCOPES = ("admin", "read")
DEFAULT_STORE_FILE = "service.sqlite"
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class Tokens:
    """Bearer tokens and their scopes; plain tokens or ``sha256:HEX`` digests of them."""

    plain: Mapping[str, str] = field(default_factory=dict)
    hashed: Mapping[str, str] = field(default_factory=dict)  # hex digest -> scope

    def __len__(self) -> int:
        return len(self.plain) + len(self.hashed)

    def scope_of(self, token: str) -> str | None:
        """The token's scope, or None when the token is unknown (compared in constant time)."""
        found = None
        for known, scope in self.plain.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                found = scope
        digest = hashlib.sha256(token.encode()).hexdigest()
        for known, scope in self.hashed.items():
            if hmac.compare_digest(known, digest):
                found = scope
        return found

    @classmethod
    def parse(cls, entries: list[tuple[str, str]], where: str) -> Tokens:
        """From (scope, token) pairs; ``where`` names the source in errors."""
        plain: dict[str, str] = {}
        hashed: dict[str, str] = {}
        for scope, token in entries:
            scope, token = scope.strip(), token.strip()
            if scope not in SCOPES:
                raise ConfigError(f"{where}: unknown scope {scope!r} (use {' or '.join(SCOPES)})")
            if not token:
                raise ConfigError(f"{where}: empty token for scope {scope!r}")
            if token.startswith("sha256:"):
                digest = token.removeprefix("sha256:").lower()
                if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                    raise ConfigError(f"{where}: sha256: token is not 64 hex digits")
                hashed[digest] = scope
            else:
                if len(token) < 16:
                    raise ConfigError(f"{where}: tokens need at least 16 characters")
                plain[token] = scope
        return cls(plain, hashed)

    @classmethod
    def from_file(cls, path: str | Path) -> Tokens:
        """A file of ``SCOPE TOKEN`` lines (blank lines and ``#`` comments ignored)."""
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"{path}: tokens file not found")
        entries = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2:
                raise ConfigError(f"{path}:{number}: expected 'SCOPE TOKEN'")
            entries.append((parts[0], parts[1]))
        return cls.parse(entries, str(path))

    @classmethod
    def from_env(cls, value: str) -> Tokens:
        """``NRP_TOKENS``: comma-separated ``SCOPE:TOKEN`` items."""
        entries = []
        for item in filter(None, (p.strip() for p in value.split(","))):
            scope, sep, token = item.partition(":")
            if not sep:
                raise ConfigError(f"NRP_TOKENS: {item[:8]}... is not SCOPE:TOKEN")
            entries.append((scope, token))
        return cls.parse(entries, "NRP_TOKENS")

    def merged(self, other: Tokens) -> Tokens:
        return Tokens({**self.plain, **other.plain}, {**self.hashed, **other.hashed})


@dataclass(frozen=True)
class ServiceConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    indexes: Path = Path("indexes")
    data_roots: tuple[Path, ...] = ()
    store: str = ""  # "" -> sqlite at INDEXES/service.sqlite
    auth: bool = True
    tokens_file: Path | None = None
    tokens: Tokens = field(default_factory=Tokens)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    cors_origins: tuple[str, ...] = ()
    batch_max_size: int = 256
    batch_max_wait_ms: float = 5.0
    batch_delay_ms: float = 0.0
    score_max_answers: int = 64
    score_timeout_s: float = 120.0
    poll_interval_s: float = 0.5
    lease_s: float = 600.0
    shutdown_timeout_s: float = 30.0
    results_page_max: int = 10_000
    preload: tuple[str, ...] = ()  # "COLLECTION=RANKER_SPEC" loaded when the worker starts
    torch_threads: int = 0  # CPU threads of the worker's models (0: torch's default)
    executor: str = "local"  # where job units run: local (the worker process) or ray
    ray_address: str = ""  # "" -> $RAY_ADDRESS, else a Ray instance of the worker's own
    log_level: str = "info"

    # -- derived ---------------------------------------------------------------------------
    @property
    def store_url(self) -> str:
        if self.store:
            return self.store
        return f"sqlite:///{(self.indexes / DEFAULT_STORE_FILE).resolve()}"

    def check(self) -> ServiceConfig:
        """Checked and normalised (paths absolute); ConfigError on a bad value."""
        if not 0 < self.port < 65536:
            raise ConfigError(f"port must be 1..65535, got {self.port}")
        for name in ("max_body_bytes", "batch_max_size", "score_max_answers", "results_page_max"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.torch_threads < 0:
            raise ConfigError(f"torch_threads must be >= 0, got {self.torch_threads}")
        for name in ("batch_max_wait_ms", "batch_delay_ms"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("score_timeout_s", "poll_interval_s", "lease_s", "shutdown_timeout_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be > 0, got {getattr(self, name)}")
        executor = self.executor.strip().lower()
        if executor not in api.EXECUTOR_KINDS:
            raise ConfigError(
                f"executor must be {' or '.join(api.EXECUTOR_KINDS)}, got {self.executor!r}"
            )
        if self.ray_address.strip() and executor != "ray":
            raise ConfigError(
                f"ray_address ({self.ray_address}) needs executor: ray (executor is {executor})"
            )
        if self.log_level.lower() not in ("debug", "info", "warning", "error"):
            raise ConfigError(f"log_level must be debug, info, warning or error: {self.log_level}")
        roots = []
        for root in self.data_roots:
            resolved = Path(root).expanduser().resolve()
            if not resolved.is_dir():
                raise ConfigError(f"data root {root} is not a folder")
            roots.append(resolved)
        tokens = self.tokens
        if self.tokens_file is not None:
            tokens = Tokens.from_file(self.tokens_file).merged(tokens)
        if self.auth and not len(tokens):
            raise ConfigError(
                "no API tokens: give a tokens file (tokens_file / --tokens-file, lines "
                "'SCOPE TOKEN') or NRP_TOKENS='admin:TOKEN,read:TOKEN'; or set auth: false to "
                "serve without authentication (local use only)"
            )
        for item in self.preload:
            if "=" not in item:
                raise ConfigError(f"preload entry {item!r} is not COLLECTION=RANKER_SPEC")
        if self.store and not self.store.startswith(("sqlite:///", "postgresql://", "postgres://")):
            raise ConfigError(
                f"store must be sqlite:///PATH or postgresql://..., got {self.store!r}"
            )
        return replace(
            self,
            indexes=Path(self.indexes).expanduser().resolve(),
            data_roots=tuple(roots),
            tokens=tokens,
            log_level=self.log_level.lower(),
            executor=executor,
            ray_address=self.ray_address.strip(),
        )

    # -- serialisation (the worker process gets the settings this way) ----------------------
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "tokens":
                value = {"plain": dict(value.plain), "hashed": dict(value.hashed)}
            elif isinstance(value, Path):
                value = str(value)
            elif isinstance(value, tuple):
                value = [str(v) for v in value]
            out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ServiceConfig:
        values = dict(data)
        tokens = values.pop("tokens", None)
        config = _apply(cls(), values, "settings")
        if isinstance(tokens, Mapping):
            config = replace(
                config, tokens=Tokens(dict(tokens.get("plain", {})), dict(tokens.get("hashed", {})))
            )
        return config


_TYPES: dict[str, Any] = {f.name: f.type for f in fields(ServiceConfig)}


def _apply(config: ServiceConfig, values: Mapping[str, Any], where: str) -> ServiceConfig:
    """``config`` with ``values`` (file keys or options) converted to each field's type."""
    known = {f.name for f in fields(ServiceConfig)} - {"tokens"}
    changes: dict[str, Any] = {}
    for key, value in values.items():
        key = str(key).replace("-", "_")
        if key not in known:
            names = ", ".join(sorted(known))
            raise ConfigError(f"{where}: unknown setting {key!r} (known: {names})")
        if value is None:
            continue
        current = getattr(config, key)
        try:
            if key in ("data_roots", "cors_origins", "preload"):
                items = [value] if isinstance(value, str | Path) else list(value)
                changes[key] = tuple(Path(v) if key == "data_roots" else str(v) for v in items)
            elif key in ("indexes", "tokens_file"):
                changes[key] = Path(str(value))
            elif isinstance(current, bool):
                if not isinstance(value, bool):
                    raise ValueError(value)
                changes[key] = value
            elif isinstance(current, int):
                if isinstance(value, bool) or int(value) != float(value):
                    raise ValueError(value)
                changes[key] = int(value)
            elif isinstance(current, float):
                if isinstance(value, bool):
                    raise ValueError(value)
                changes[key] = float(value)
            else:
                changes[key] = str(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: {key}={value!r} is not a valid value") from None
    return replace(config, **changes)


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The mapping of a YAML or TOML config file; a relative path inside it is taken from the
    file's folder (indexes, data_roots, tokens_file)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix.lower() == ".toml":
            import tomllib

            data = tomllib.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text) or {}
    except Exception as err:  # parser errors have many types
        raise ConfigError(f"{path}: cannot parse: {' '.join(str(err).split())}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings")
    base = path.parent
    for key in ("indexes", "tokens_file"):
        if isinstance(data.get(key), str):
            data[key] = str(base / data[key])
    if "data_roots" in data:
        roots = data["data_roots"]
        roots = [roots] if isinstance(roots, str) else roots
        if not isinstance(roots, list):
            raise ConfigError(f"{path}: data_roots must be a list of folders")
        data["data_roots"] = [str(base / str(r)) for r in roots]
    if isinstance(data.get("store"), str) and data["store"].startswith("sqlite:///"):
        target = Path(data["store"].removeprefix("sqlite:///"))
        data["store"] = f"sqlite:///{base / target}"
    return data


def load_config(
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> ServiceConfig:
    """Defaults, then the config file, then the environment, then ``overrides`` (options
    that are None are left out); checked."""
    environ = os.environ if environ is None else environ
    config = ServiceConfig()
    from_file: dict[str, Any] = {}
    if config_file is not None:
        from_file = read_config_file(config_file)
        config = _apply(config, from_file, str(config_file))
    if environ.get("NRP_INDEXES") and "indexes" not in from_file:
        # as the CLI's other commands: $NRP_INDEXES unless the settings name a folder
        config = replace(config, indexes=Path(environ["NRP_INDEXES"]))
    if environ.get("NRP_SERVICE_STORE"):
        config = replace(config, store=environ["NRP_SERVICE_STORE"])
    if environ.get("NRP_TOKENS"):
        config = replace(config, tokens=Tokens.from_env(environ["NRP_TOKENS"]))
    if environ.get("NRP_EXECUTOR"):
        config = replace(config, executor=environ["NRP_EXECUTOR"])
    if environ.get("NRP_RAY_ADDRESS"):
        config = replace(config, ray_address=environ["NRP_RAY_ADDRESS"])
    if overrides:
        config = _apply(config, {k: v for k, v in overrides.items() if v is not None}, "options")
    return config.check()
