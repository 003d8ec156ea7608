"""The service's guards that need no running server (issue 16): ``--no-auth`` on a public host,
model folders confined to model roots or named in the settings, and error messages that name
no absolute server path."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from service_helpers import free_port

from nrp.errors import ConfigError
from nrp.service.app import create_app
from nrp.service.config import load_config
from nrp.service.inputs import ModelPlaces, RequestError, canonical_ranker, check_spec_paths
from nrp.spec import Param

ROOT = Path(__file__).resolve().parents[2]


# -- no authentication on a public address ------------------------------------------------------
def test_nrp_serve_without_auth_on_a_public_host_exits_2_with_one_line(tmp_path):
    command = [sys.executable, "-m", "nrp", "serve", "--no-auth", "--host", "192.0.2.1"]
    command += ["--port", str(free_port()), "--indexes", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("nrp: error: auth is off (--no-auth / auth: false) and host ")
    assert "give --allow-no-auth-public (allow_public_no_auth: true)" in lines[0]


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1", "example.org"])
def test_no_auth_needs_loopback_or_the_second_flag(tmp_path, host):
    settings = {"indexes": tmp_path, "auth": False, "host": host}
    with pytest.raises(ConfigError, match="is not a loopback address"):
        load_config(None, settings, environ={})
    allowed = load_config(None, {**settings, "allow_public_no_auth": True}, environ={})
    assert allowed.auth is False
    assert allowed.startup_warnings() == [
        f"serving WITHOUT authentication on {host} (allow_public_no_auth): anyone who reaches "
        "the port is an admin"
    ]
    for loopback in ("127.0.0.1", "localhost", "::1", "127.8.9.1"):
        local = load_config(None, {**settings, "host": loopback}, environ={})
        assert local.startup_warnings() == []


def test_a_server_allowed_to_run_public_without_auth_warns_when_it_starts(tmp_path, caplog):
    config = load_config(
        None,
        {"indexes": tmp_path, "auth": False, "host": "0.0.0.0", "allow_public_no_auth": True},
        environ={},
    )
    app = create_app(config, start_worker=False)

    async def start_and_stop() -> None:
        async with app.router.lifespan_context(app):  # what uvicorn runs around serving
            pass

    with caplog.at_level(logging.WARNING, logger="nrp.service"):
        asyncio.run(start_and_stop())
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "serving WITHOUT authentication on 0.0.0.0 (allow_public_no_auth): anyone who reaches "
        "the port is an admin"
    ]


# -- models ---------------------------------------------------------------------------------------
def test_model_values_resolve_only_to_roots_named_models_or_packaged_ones(tmp_path, monkeypatch):
    from nrp.rankers.dense import PARAMS

    data = (tmp_path / "data").resolve()
    models = (tmp_path / "models").resolve()
    (data / "models" / "mini").mkdir(parents=True)
    (models / "tuned").mkdir(parents=True)
    (tmp_path / "cwd" / "leak").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "cwd")  # the server's working folder holds leak/
    places = ModelPlaces((models,), (("house", str(models / "tuned")),), "model roots")

    def check(spec: str, where: ModelPlaces | None = places) -> str:
        return check_spec_paths(spec, PARAMS, [data], tmp_path / "indexes", "ranker", where)

    assert check("dense:model=house") == f"dense:model={models / 'tuned'}"
    assert check("dense:model=tuned,passages=3") == f"dense:model={models / 'tuned'},passages=3"
    assert check(f"dense:model={models / 'tuned'}") == f"dense:model={models / 'tuned'}"
    assert check("dense:model=mpnet") == "dense:model=mpnet"
    assert check("dense:model=minilm") == "dense:model=minilm"  # the default: not checked
    for refused in ("leak", "org/hub-id", "models/mini"):
        with pytest.raises(RequestError) as err:
            check(f"dense:model={refused}")
        assert (err.value.status, str(err.value)) == (
            422,
            f"ranker 'dense' parameter model: {refused!r} is not a model this server offers "
            "(it offers: minilm, mpnet, house; or a folder relative to one of its model roots)",
        )
    for outside in ("/etc", "../models/tuned", "tuned/../tuned"):
        with pytest.raises(RequestError, match="is outside the model roots"):
            check(f"dense:model={outside}")
    # without model roots the data roots hold the model folders, as before
    assert check("dense:model=models/mini", None) == f"dense:model={data / 'models' / 'mini'}"
    with pytest.raises(RequestError, match="'leak' is not a model this server offers"):
        check("dense:model=leak", None)


def test_a_parameters_declared_kind_decides_its_check_never_its_name(tmp_path, monkeypatch):
    data = (tmp_path / "data").resolve()
    (data / "in").mkdir(parents=True)
    (data / "in" / "table.tsv").write_text("x\n")
    (tmp_path / "cwd").mkdir()
    (tmp_path / "cwd" / "leak.tsv").write_text("secret\n")
    monkeypatch.chdir(tmp_path / "cwd")  # the server's working folder holds leak.tsv
    declared = {
        "model": Param(str, "", "a label, named model but plain text"),
        "source": Param(str, "", "a table read", kind="path"),
        "encoder": Param(str, "", "a model loaded", kind="model"),
    }

    def check(spec: str) -> str:
        return check_spec_paths(spec, declared, [data], tmp_path / "indexes", "ranker")

    # named model, declared text: not looked up among the models (a model would be refused)
    assert check("x:model=my-label") == "x:model=my-label"
    # a path under any name is checked against the data roots, and rewritten to the file there
    assert check("x:source=in/table.tsv") == f"x:source={data / 'in' / 'table.tsv'}"
    for outside in ("leak.tsv", "/etc/passwd", "../cwd/leak.tsv"):
        with pytest.raises(RequestError) as err:
            check(f"x:source={outside}")
        assert (err.value.status, str(err.value)) == (
            422,
            f"ranker 'x' parameter source: {outside!r} is outside the data roots",
        )
    assert check("x:model=leak.tsv") == "x:model=leak.tsv"  # text without a slash: as given
    with pytest.raises(RequestError, match="'my-label' is not a model this server offers"):
        check("x:encoder=my-label")


def test_a_file_of_a_ranker_inside_a_fusion_lies_in_the_data_roots(tmp_path):
    data = (tmp_path / "data").resolve()
    data.mkdir()
    (data / "guard.json").write_text("{}")

    def canonical(spec: str) -> str:
        return canonical_ranker(spec, [data], tmp_path / "indexes")

    inside = f"fuse:rankers=bm25+guard:model={data / 'guard.json'};ranker=bm25"
    assert canonical(f"fuse:rankers=bm25+guard:ranker=bm25;model={data / 'guard.json'}") == inside
    for value in ("/etc/passwd", "guard.json"):
        with pytest.raises(RequestError) as err:
            canonical(f"fuse:rankers=bm25+guard:ranker=bm25;model={value}")
        assert (err.value.status, str(err.value)) == (  # a guard's model file is a model
            422,
            f"ranker 'fuse': its ranker 'guard' parameter model: {value!r} is not a model this "
            "server offers (it offers: minilm, mpnet; or an absolute folder inside its data "
            "roots)",
        )


def test_a_param_kind_is_text_path_or_model_and_only_a_string_names_a_file():
    assert Param(str, "", "").kind == "text"
    with pytest.raises(ValueError, match="parameter kind 'url': one of text, path, model"):
        Param(str, "", "", kind="url")
    with pytest.raises(ValueError, match="a path parameter is a str, not int"):
        Param(int, 0, "", kind="path")


def test_settings_name_models_and_model_roots_relative_to_the_file(tmp_path):
    (tmp_path / "models" / "tuned").mkdir(parents=True)
    (tmp_path / "tokens.txt").write_text("admin admin-token-0123456789\n")
    path = tmp_path / "service.yaml"
    path.write_text(
        "tokens_file: tokens.txt\nmodel_roots: [models]\nread_rankers: [bm25*, dense]\n"
        "models: {tuned: models/tuned, remote: org/hub-model}\npool_max_entries: 4\n"
    )
    config = load_config(path, environ={})
    assert config.model_roots == ((tmp_path / "models").resolve(),)
    tuned = str((tmp_path / "models" / "tuned").resolve())
    assert config.models == {"tuned": tuned, "remote": "org/hub-model"}
    assert config.read_rankers == ("bm25*", "dense")
    assert (config.pool_max_entries, config.pool_max_bytes) == (4, 4 * 1024**3)
    places = ModelPlaces.of(config)
    assert places.roots == config.model_roots and places.label == "model roots"
    for bad, message in (
        ("pool_max_bytes: 0\n", "pool_max_bytes must be at least 1"),
        ("model_roots: [nowhere]\n", "model root"),
        ("models: {a: /nowhere/at/all}\n", "is not a folder"),
        ("models: {'a:b': x}\n", "a name (no ':', ',' or '=')"),
    ):
        path.write_text("tokens_file: tokens.txt\n" + bad)
        with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
            load_config(path, environ={})


def test_rankers_inside_a_fusion_load_only_offered_models(tmp_path, monkeypatch):
    models = (tmp_path / "models").resolve()
    (models / "tuned").mkdir(parents=True)
    (tmp_path / "cwd" / "leak").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "cwd")
    places = ModelPlaces((models,), (), "model roots")

    def canonical(spec: str) -> str:
        return canonical_ranker(spec, [models], tmp_path / "indexes", places)

    assert canonical("fuse:rankers=bm25+dense:model=mpnet") == "fuse:rankers=bm25+dense:model=mpnet"
    inside = f"fuse:rankers=bm25+dense:model={models / 'tuned'}"
    assert canonical(inside) == inside
    for value in ("leak", "/etc", "org/hub-model"):
        with pytest.raises(RequestError) as err:
            canonical(f"fuse:rankers=bm25+dense:model={value}")
        assert (err.value.status, str(err.value)) == (
            422,
            f"ranker 'fuse': its ranker 'dense' parameter model: {value!r} is not a model this "
            "server offers (it offers: minilm, mpnet; or an absolute folder inside its model "
            "roots)",
        )
