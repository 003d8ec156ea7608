"""Settings of ``nrp serve``: where data may be read from, where state lives, who may call.

Settings come from, in increasing precedence: the defaults below, a config file (YAML or TOML,
``--config``), environment variables (``NRP_TOKENS``, ``NRP_SERVICE_STORE``, ``NRP_EXECUTOR``,
``NRP_RAY_ADDRESS``; ``NRP_INDEXES`` only when the file names no ``indexes``, as for the other
commands) and command-line options.
Every unknown key, key given twice or bad value is a ``ConfigError`` naming the file and key
(and line), so a typo never silently falls back to a default.

Choices, and why:

- **Tokens required by default.** A service that scores answers can also ingest files of the
  server: an open port must not do that. ``auth: false`` turns checking off explicitly, for
  local use: on a host that is not a loopback address it is refused unless
  ``allow_public_no_auth: true`` (``--allow-no-auth-public``) says so too, and the server then
  warns when it starts. Two scopes: ``admin`` (ingest, submit and cancel jobs) and ``read``
  (everything that only reads: collections, jobs, results, leaderboard, metrics, and ``POST
  /v1/score``, which computes from cached scores and stores nothing). A token may be written as
  ``sha256:HEX`` (the SHA-256 of the token) so that the tokens file need not hold secrets. A
  third scope, ``review/NAME``, is a reviewer's: it reaches only the review app's routes, and
  only the review projects that list NAME as a reviewer (``review_projects``).
- **Data roots.** Paths in requests (manifests, answer files, model folders in ranker specs) are
  relative to one of the configured data roots and must stay inside it after symbolic links are
  resolved; without data roots no request can name a server file at all.
- **Model roots and named models.** A model a spec names (``dense:model=...``) is a packaged
  model (``minilm``, ``mpnet``), a name from ``models`` (name -> folder or hub id, chosen by the
  operator), or a folder inside a ``model_roots`` folder (default: the data roots). Nothing
  else: no folder relative to the server's working directory, no model hub download.
- **What a read token may rank with.** ``read_rankers``: patterns (``fnmatch``) a ranker spec of
  a read token's ``POST /v1/score`` must match, as sent or in its canonical form (default
  ``*``: any). Admin tokens are not restricted.
- **Worker memory.** The worker keeps the rankers (bound to a collection, with their
  positioners) and evaluators it builds in one LRU pool of at most ``pool_max_entries`` entries
  and ``pool_max_bytes`` estimated bytes (``nrp.service.pool``); docs/security.md lists every
  limit and its default.
- **Store.** SQLite in WAL mode beside the indexes by default (one server); a ``postgresql://``
  URL for a store that several servers share.
- **Batching.** The worker groups work from all jobs and synchronous requests per ranker:
  ``batch_max_size`` answers per model call at most, waiting up to ``batch_max_wait_ms`` for a
  synchronous batch to fill. The default, 0, waits for nothing: a batch is what arrived while
  the worker computed the previous one, so a lone request is answered at once and a busy
  worker still puts many requests into one call (waiting adds its wait to every request's
  latency and lowers the rate a busy worker serves). ``batch_delay_ms`` sleeps after every job
  batch: it exists for tests that need a job to stay in flight (kill -9 mid-job), never for
  production.
- **Turns.** The worker computes synchronous requests in turns: each turn gives every request
  waiting a slice of its answers worth about ``score_slice_ms`` of work (at the rates measured
  for its rankers; one answer while a ranker's rate is unknown), so a cheap request waits for
  one slice of an expensive one, not for all of it, and a request past its deadline
  (``score_timeout_s``) is dropped at the end of its slice. One answer is the smallest
  slice, so ``score_max_passages`` bounds what rankers that cut answers into passages
  (``dense:passages=N``) may read for one request: more is a ``422`` (submit a job). On
  SIGTERM the worker keeps serving the requests in hand for half of ``shutdown_timeout_s``
  (no turn begins that, as long as the last, would end past it) and answers those left
  ``503``; new ones get ``503`` at once.
- **Executor.** ``executor: ray`` (with ``ray_address``, else ``$RAY_ADDRESS``, else a Ray
  instance started by the worker) runs job units on a Ray cluster (``nrp.service.worker``);
  ``local`` (the default) runs them in the worker process. ``ray_address`` without ``ray`` is
  an error rather than ignored: it says the operator meant to use a cluster. Not
  ``$RAY_ADDRESS`` for the setting itself: a shell that has it set for other Ray work must not
  make a local service refuse to start.
- **CPU threads.** ``torch_threads`` caps the worker's intra-op threads. On a machine whose cores
  other processes also use, torch's default (one thread per core) makes its threads wait for
  each other, and a forward pass takes several times as long as with one thread. 0 keeps
  torch's default (right for a machine of its own).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from nrp import engine
from nrp.errors import ConfigError, InputError

SCOPES = ("admin", "read")
#: a reviewer's scope: ``review/NAME``, NAME as the review projects name their reviewers
REVIEW_SCOPE = re.compile(r"^review/[A-Za-z0-9_.-]{1,64}$")
DEFAULT_STORE_FILE = "service.sqlite"
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
DEFAULT_POOL_MAX_ENTRIES = 16
DEFAULT_POOL_MAX_BYTES = 4 * 1024**3
PATH_LIST_SETTINGS = ("data_roots", "model_roots", "review_projects")


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
            if scope not in SCOPES and not REVIEW_SCOPE.match(scope):
                raise ConfigError(
                    f"{where}: unknown scope {scope!r} (use {', '.join(SCOPES)} or review/NAME)"
                )
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
    model_roots: tuple[Path, ...] = ()  # () -> the data roots
    review_projects: tuple[Path, ...] = ()  # review project files (in a data root) it serves
    models: dict[str, str] = field(default_factory=dict)  # name -> model folder or hub id
    store: str = ""  # "" -> sqlite at INDEXES/service.sqlite
    auth: bool = True
    allow_public_no_auth: bool = False  # auth: false on a non-loopback host
    tokens_file: Path | None = None
    tokens: Tokens = field(default_factory=Tokens)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    cors_origins: tuple[str, ...] = ()
    batch_max_size: int = 256
    batch_max_wait_ms: float = 0.0
    batch_delay_ms: float = 0.0
    score_max_answers: int = 64
    score_max_passages: int = 4096  # passages a synchronous request's rankers cut its answers into
    score_timeout_s: float = 120.0
    score_slice_ms: float = 250.0  # a synchronous request's work per turn of the worker
    poll_interval_s: float = 0.5
    lease_s: float = 600.0
    shutdown_timeout_s: float = 30.0
    results_page_max: int = 10_000
    read_rankers: tuple[str, ...] = ("*",)  # fnmatch patterns of the specs a read token may use
    pool_max_entries: int = DEFAULT_POOL_MAX_ENTRIES  # rankers and evaluators the worker keeps
    pool_max_bytes: int = DEFAULT_POOL_MAX_BYTES  # their estimated memory
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

    @property
    def model_folders(self) -> tuple[Path, ...]:
        """The folders model folders in specs are relative to: ``model_roots``, else the data
        roots."""
        return self.model_roots or self.data_roots

    @property
    def server_roots(self) -> tuple[Path, ...]:
        """The folders whose files an error message names relative to the folder
        (``nrp.service.disclosure``): data roots, model roots, the indexes."""
        return (*self.data_roots, *self.model_roots, Path(self.indexes))

    def check(self) -> ServiceConfig:
        """Checked and normalised (paths absolute); ConfigError on a bad value."""
        if not 0 < self.port < 65536:
            raise ConfigError(f"port must be 1..65535, got {self.port}")
        for name in (
            "max_body_bytes",
            "batch_max_size",
            "score_max_answers",
            "score_max_passages",
            "results_page_max",
            "pool_max_entries",
            "pool_max_bytes",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.torch_threads < 0:
            raise ConfigError(f"torch_threads must be >= 0, got {self.torch_threads}")
        for name in ("batch_max_wait_ms", "batch_delay_ms"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in (
            "score_timeout_s",
            "score_slice_ms",
            "poll_interval_s",
            "lease_s",
            "shutdown_timeout_s",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be > 0, got {getattr(self, name)}")
        executor = self.executor.strip().lower()
        if executor not in engine.EXECUTOR_KINDS:
            raise ConfigError(
                f"executor must be {' or '.join(engine.EXECUTOR_KINDS)}, got {self.executor!r}"
            )
        if self.ray_address.strip() and executor != "ray":
            raise ConfigError(
                f"ray_address ({self.ray_address}) needs executor: ray (executor is {executor})"
            )
        if self.log_level.lower() not in ("debug", "info", "warning", "error"):
            raise ConfigError(f"log_level must be debug, info, warning or error: {self.log_level}")
        self._check_public_no_auth()
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
            data_roots=_folders(self.data_roots, "data root"),
            model_roots=_folders(self.model_roots, "model root"),
            review_projects=self._review_projects(),
            models=_named_models(self.models),
            read_rankers=tuple(p.strip() for p in self.read_rankers if p.strip()),
            tokens=tokens,
            log_level=self.log_level.lower(),
            executor=executor,
            ray_address=self.ray_address.strip(),
        )

    def _review_projects(self) -> tuple[Path, ...]:
        """The review project files resolved, each a file inside a data root."""
        files = []
        roots = _folders(self.data_roots, "data root")
        for path in self.review_projects:
            resolved = Path(path).expanduser().resolve()
            if not resolved.is_file():
                raise ConfigError(f"review project {path} is not a file")
            if not engine.inside_roots(resolved, roots):
                raise ConfigError(f"review project {path} is not inside a data root")
            files.append(resolved)
        return tuple(files)

    def _check_public_no_auth(self) -> None:
        """``auth: false`` on a host other than loopback only with ``allow_public_no_auth``."""
        if self.auth or self.allow_public_no_auth or is_loopback(self.host):
            return
        raise ConfigError(
            f"auth is off (--no-auth / auth: false) and host {self.host} is not a loopback "
            "address: anyone who reaches the port could ingest server files and submit jobs; "
            "give --allow-no-auth-public (allow_public_no_auth: true) as well to serve so"
        )

    def startup_warnings(self) -> list[str]:
        """What the server warns about when it starts (settings allowed but risky)."""
        if not self.auth and not is_loopback(self.host):
            return [
                f"serving WITHOUT authentication on {self.host} (allow_public_no_auth): anyone "
                "who reaches the port is an admin"
            ]
        return []

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


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1); a name that is not an
    address is taken as public."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _folders(paths: tuple[Path, ...], what: str) -> tuple[Path, ...]:
    """``paths`` resolved, each an existing folder (ConfigError otherwise)."""
    folders = []
    for path in paths:
        resolved = Path(path).expanduser().resolve()
        if not resolved.is_dir():
            raise ConfigError(f"{what} {path} is not a folder")
        folders.append(resolved)
    return tuple(folders)


def _named_models(models: Mapping[str, str]) -> dict[str, str]:
    """``models`` checked: names without ``:``, ``,`` or ``=`` (they go into spec strings);
    an absolute target must be an existing folder (a relative one is a hub id)."""
    checked = {}
    for name, target in models.items():
        name, target = str(name).strip(), str(target).strip()
        if not name or any(c in name for c in ":,=") or not target:
            raise ConfigError(f"models: {name!r}: a name (no ':', ',' or '=') and a target")
        if Path(target).expanduser().is_absolute():
            folder = Path(target).expanduser().resolve()
            if not folder.is_dir():
                raise ConfigError(f"models: {name}: {target} is not a folder")
            target = str(folder)
        checked[name] = target
    return checked


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
            if key in (*PATH_LIST_SETTINGS, "cors_origins", "preload", "read_rankers"):
                items = [value] if isinstance(value, str | Path) else list(value)
                is_path = key in PATH_LIST_SETTINGS
                changes[key] = tuple(Path(v) if is_path else str(v) for v in items)
            elif key == "models":
                if not isinstance(value, Mapping):
                    raise ValueError(value)
                changes[key] = {str(k): str(v) for k, v in value.items()}
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
    file's folder (indexes, data_roots, model_roots, tokens_file, and a named model's target
    when that folder exists: else it is a hub id)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    try:
        # strictly, as manifests: a setting given twice is an error at its line, not "last wins"
        data = engine.read_mapping_text(path, path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: cannot parse: not valid UTF-8") from None
    except InputError as err:
        where = path if err.line is None else f"{path}:{err.line}"
        raise ConfigError(f"{where}: cannot parse: {err.problem}") from None
    data = data or {}  # an empty file: no settings
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings")
    base = path.parent
    for key in ("indexes", "tokens_file"):
        if isinstance(data.get(key), str):
            data[key] = str(base / data[key])
    for key in PATH_LIST_SETTINGS:
        if key in data:
            roots = data[key]
            roots = [roots] if isinstance(roots, str) else roots
            if not isinstance(roots, list):
                raise ConfigError(f"{path}: {key} must be a list of folders")
            data[key] = [str(base / str(r)) for r in roots]
    if isinstance(data.get("models"), dict):
        data["models"] = {
            name: str(base / str(target)) if (base / str(target)).is_dir() else target
            for name, target in data["models"].items()
        }
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
