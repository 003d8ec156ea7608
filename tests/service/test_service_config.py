"""Settings, tokens, server paths, metrics text and the committed OpenAPI document: the parts of
the service that need no running server."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from nrp.cli import main as cli_main
from nrp.errors import ConfigError
from nrp.service.config import ServiceConfig, Tokens, load_config
from nrp.service.inputs import RequestError, check_spec_paths, resolve_in_roots
from nrp.service.metrics import Counter, Histogram, Registry

ROOT = Path(__file__).resolve().parents[2]
ADMIN = "admin-token-0123456789"


def test_config_file_env_and_options_in_order_of_precedence(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "tokens.txt").write_text(f"admin {ADMIN}\n# a comment\n\nread sha256:{'a' * 64}\n")
    config_file = tmp_path / "service.yaml"
    config_file.write_text(
        "port: 9001\nindexes: idx\ndata_roots: [data]\ntokens_file: tokens.txt\n"
        "batch_max_wait_ms: 7\ncors_origins: [https://example.org]\n"
    )
    config = load_config(config_file, {"port": 9002}, environ={})
    assert config.port == 9002  # the option wins over the file
    assert config.indexes == (tmp_path / "idx").resolve()
    assert config.data_roots == ((tmp_path / "data").resolve(),)
    assert config.batch_max_wait_ms == 7.0
    assert config.cors_origins == ("https://example.org",)
    assert config.tokens.scope_of(ADMIN) == "admin"
    assert config.store_url == f"sqlite:///{(tmp_path / 'idx' / 'service.sqlite').resolve()}"
    env = {"NRP_TOKENS": "read:read-token-0123456789", "NRP_SERVICE_STORE": "postgresql://x/y"}
    with_env = load_config(config_file, environ=env)
    assert with_env.tokens.scope_of("read-token-0123456789") == "read"
    assert with_env.tokens.scope_of(ADMIN) == "admin"  # file and environment tokens together
    assert with_env.store_url == "postgresql://x/y"
    # the worker process receives the settings as a dict
    assert ServiceConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("prot: 1\n", "unknown setting 'prot'"),
        ("port: many\n", "port='many' is not a valid value"),
        ("port: 70000\n", "port must be 1..65535"),
        ("batch_max_size: 0\n", "batch_max_size must be at least 1"),
        ("auth: 'yes'\n", "auth='yes' is not a valid value"),
        ("data_roots: [nowhere]\n", "is not a folder"),
        ("store: mysql://x\n", "store must be sqlite:///PATH or postgresql://"),
        ("[1, 2]\n", "expected a mapping of settings"),
        ("port: [\n", "cannot parse"),
    ],
)
def test_bad_settings_are_config_errors(tmp_path, text, message):
    path = tmp_path / "service.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        load_config(path, {"auth": False} if "auth" not in text else None, environ={})


def test_tokens_are_required_unless_auth_is_off(tmp_path):
    with pytest.raises(ConfigError, match="no API tokens"):
        load_config(None, {"indexes": tmp_path}, environ={})
    assert load_config(None, {"indexes": tmp_path, "auth": False}, environ={}).auth is False


def test_token_files_and_env_are_checked():
    with pytest.raises(ConfigError, match="unknown scope 'root'"):
        Tokens.from_env(f"root:{ADMIN}")
    with pytest.raises(ConfigError, match="at least 16 characters"):
        Tokens.from_env("admin:short")
    with pytest.raises(ConfigError, match="not SCOPE:TOKEN"):
        Tokens.from_env("justatokenwithoutscope")
    with pytest.raises(ConfigError, match="64 hex digits"):
        Tokens.from_env("read:sha256:xyz")
    digest = hashlib.sha256(b"read-token-0123456789").hexdigest()
    tokens = Tokens.from_env(f"admin:{ADMIN},read:sha256:{digest}")
    assert tokens.scope_of("read-token-0123456789") == "read"
    assert tokens.scope_of(ADMIN) == "admin"
    assert tokens.scope_of("admin-token-012345678") is None


def test_tokens_file_errors_name_file_and_line(tmp_path):
    path = tmp_path / "tokens.txt"
    path.write_text(f"admin {ADMIN}\nread\n")
    with pytest.raises(ConfigError, match=r"tokens.txt:2: expected 'SCOPE TOKEN'"):
        Tokens.from_file(path)


def test_nrp_serve_with_a_bad_config_exits_2_with_one_line(tmp_path, capsys):
    path = tmp_path / "service.toml"
    path.write_text("porty = 1\n")
    assert cli_main(["serve", "--config", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("nrp: error: ") and "unknown setting 'porty'" in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("name", "text", "line", "problem"),
    [
        # the last value is out of range: a reader that keeps it fails, never starts a server
        ("service.yaml", "port: 9001\nhost: 127.0.0.1\nport: 70000\n", 3,
         "key 'port' given twice (first at line 1)"),
        ("service.toml", "port = 9001\nhost = '127.0.0.1'\nport = 70000\n", 3,
         "Cannot overwrite"),
    ],
)  # fmt: skip
def test_nrp_serve_refuses_a_config_file_that_gives_a_setting_twice(
    tmp_path, capsys, name, text, line, problem
):
    path = tmp_path / name
    path.write_text(text)
    assert cli_main(["serve", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"nrp: error: {path}:{line}: cannot parse: ")
    assert problem in err and len(err.strip().splitlines()) == 1


def test_server_paths_stay_inside_the_data_roots(tmp_path):
    root = (tmp_path / "root").resolve()
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.jsonl").write_text("{}\n")
    (tmp_path / "other").mkdir()
    (root / "out").symlink_to(tmp_path / "other")
    assert resolve_in_roots("sub/a.jsonl", [root], "answers") == root / "sub" / "a.jsonl"
    refused = {
        "../x": "outside the data roots ('..' not allowed)",
        "sub/../../x": "outside the data roots ('..' not allowed)",
        "/etc/passwd": "must be relative to a data root",
        "~/x": "must be relative to a data root",
        "out": "outside the data roots (a link leads out)",
        "sub/b.jsonl": "not found in the data roots",
        "": "empty or invalid path",
    }
    for text, problem in refused.items():
        with pytest.raises(RequestError, match=problem.replace("(", r"\(").replace(")", r"\)")):
            resolve_in_roots(text, [root], "answers")
    with pytest.raises(RequestError, match="no data roots"):
        resolve_in_roots("sub/a.jsonl", [], "answers")


def test_model_paths_in_specs_are_checked_and_resolved(tmp_path):
    from nrp.rankers.dense import PARAMS

    root = (tmp_path / "root").resolve()
    (root / "models" / "mini").mkdir(parents=True)
    indexes = tmp_path / "indexes"
    check = lambda spec: check_spec_paths(spec, PARAMS, [root], indexes, "ranker")  # noqa: E731
    assert check("dense") == "dense"
    assert check("dense:model=minilm,batch=8") == "dense:model=minilm,batch=8"
    assert check("dense:model=models/mini") == f"dense:model={root / 'models' / 'mini'}"
    assert check(f"dense:model={root / 'models' / 'mini'}").endswith("models/mini")
    # issue 16: a hub id is no folder of a root (and a request must not make the server fetch
    # a model): refused, where it used to pass through to the worker
    with pytest.raises(RequestError, match="'org/hub-id' is not a model this server offers"):
        check("dense:model=org/hub-id")
    for outside in ("/etc", "../models", str(tmp_path)):
        with pytest.raises(RequestError, match="outside the data roots"):
            check(f"dense:model={outside}")


def test_metrics_exposition_text():
    registry = Registry()
    counter = registry.add(Counter("c_total", "a counter", ("route",)))
    histogram = registry.add(Histogram("h_seconds", "a histogram", (0.1, 1.0)))
    counter.inc(2, 'a"b')
    histogram.observe(0.05)
    histogram.observe(0.5)
    assert registry.exposition() == (
        "# HELP c_total a counter\n"
        "# TYPE c_total counter\n"
        'c_total{route="a\\"b"} 2\n'
        "# HELP h_seconds a histogram\n"
        "# TYPE h_seconds histogram\n"
        'h_seconds_bucket{le="0.1"} 1\n'
        'h_seconds_bucket{le="1"} 2\n'
        'h_seconds_bucket{le="+Inf"} 2\n'
        "h_seconds_sum 0.55\n"
        "h_seconds_count 2\n"
    )


def test_committed_openapi_document_is_current():
    from nrp.service.app import openapi_document

    committed = json.loads((ROOT / "docs" / "openapi.json").read_text())
    assert committed == openapi_document(), "docs/openapi.json is out of date: make openapi"
    assert set(committed["paths"]) >= {
        "/v1/jobs",
        "/v1/jobs/{job_id}",
        "/v1/jobs/{job_id}/results",
        "/v1/score",
        "/v1/leaderboard",
        "/v1/collections",
        "/healthz",
        "/readyz",
        "/metrics",
    }
