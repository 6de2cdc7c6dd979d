"""The admin token: state-changing requests need it, GAIA's own no-op calls and inference do not.

The routes run for real (Starlette test client); only llama.cpp is left out: the backend
below records starts instead of launching llama-server, which is all these rules touch.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from trialbox_llm.__main__ import parse_args
from trialbox_llm.admin import (
    ADMIN_TOKEN_ENV,
    AdminGuard,
    AdminTokenError,
    bearer,
    token_from_environment,
)
from trialbox_llm.backend import LlamaBackend, LoadedModel
from trialbox_llm.catalog import CATALOG, MINILM, SMOLLM2, ModelSpec
from trialbox_llm.llamacpp_args import LlamaArgs
from trialbox_llm.routes import ServerState, build_app
from trialbox_llm.schemas import ServerIdentity

TOKEN = "t" * 40
GAIA_CHAT_FLAGS = "--parallel 2 --kv-unified --cache-ram 0 --slot-prompt-similarity 0.5"
CHAT_ALIAS, EMBED_ALIAS = SMOLLM2.aliases[0], MINILM.aliases[0]


class RecordingBackend(LlamaBackend):
    """A real LlamaBackend (planning, reuse, restart decisions) that records starts instead
    of running llama-server."""

    def __init__(self, models_dir: Path) -> None:
        super().__init__(models_dir, threads=1)
        self.starts: list[tuple[str, int, str]] = []

    def _start(self, spec: ModelSpec, loaded_as: str, ctx: int, args: LlamaArgs) -> LoadedModel:
        self.starts.append((spec.name, ctx, args.as_flags()))
        return LoadedModel(spec, loaded_as, ctx, 1, args, server=None)

    @staticmethod
    def _stop(model: LoadedModel) -> None:
        return None


def make_client(tmp_path: Path, token: str | None) -> tuple[TestClient, RecordingBackend]:
    for spec in CATALOG:
        (tmp_path / spec.file).write_bytes(b"gguf")
    backend = RecordingBackend(tmp_path)
    for spec in CATALOG:  # as the server starts: both models resident, as GAIA loads them
        backend.load(spec, spec.aliases[0])
    backend.starts.clear()
    state = ServerState(
        backend=backend,
        identity=ServerIdentity(version="test", engine="none", lemonade_api="2026.43.3"),
        models_dir=tmp_path,
        llama_version="test",
        admin=AdminGuard(token),
    )
    return TestClient(build_app(state), base_url="http://llm"), backend


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[tuple[TestClient, RecordingBackend]]:
    client, backend = make_client(tmp_path, TOKEN)
    with client:
        yield client, backend


ADMIN = {"Authorization": f"Bearer {TOKEN}"}
RESTART = {"model_name": CHAT_ALIAS, "llamacpp_args": "--slot-prompt-similarity 0.25"}


def assert_forbidden(response, fix: str) -> None:
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["type"] == "forbidden" and error["code"] == "admin_token_required"
    assert fix in error["message"]


# --- GAIA's own calls keep working without a token -------------------------------------------


def test_gaias_loads_of_resident_models_need_no_token(guarded) -> None:
    client, backend = guarded
    chat = client.post(
        "/api/v1/load",
        json={"model_name": CHAT_ALIAS, "ctx_size": 65536, "llamacpp_args": GAIA_CHAT_FLAGS},
    )
    embed = client.post("/api/v1/load", json={"model_name": EMBED_ALIAS})
    assert chat.status_code == embed.status_code == 200
    assert chat.json()["started"] is False and embed.json()["started"] is False
    assert backend.starts == []


@pytest.mark.parametrize("body", [{"model_name": CHAT_ALIAS}, {}])
def test_unload_is_a_no_op_for_everyone(guarded, body) -> None:
    client, backend = guarded
    response = client.post("/api/v1/unload", json=body)
    assert response.status_code == 200 and response.json()["kept_resident"] is True
    assert len(backend.loaded()) == 2


def test_unload_of_a_model_that_is_not_loaded_stays_the_404_gaia_tolerates(guarded) -> None:
    client, _ = guarded
    assert client.post("/api/v1/unload", json={"model_name": "Qwen3-0.6B-GGUF"}).status_code == 404


def test_pull_of_a_bundled_model_needs_no_token(guarded) -> None:
    client, _ = guarded
    assert client.post("/api/v1/pull", json={"model_name": EMBED_ALIAS}).status_code == 200


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/live", None),
        ("GET", "/api/v1/health", None),
        ("GET", "/api/v1/models", None),
        ("GET", "/api/v1/stats", None),
    ],
)
def test_status_routes_ignore_the_token(guarded, method, path, body) -> None:
    client, _ = guarded
    assert client.request(method, path, json=body).status_code == 200
    assert client.request(method, path, json=body, headers=ADMIN).status_code == 200


def test_inference_is_never_refused_for_want_of_a_token(guarded) -> None:
    client, _ = guarded
    # No llama-server runs behind this backend, so the request reaches the proxy step and
    # fails there (502): it was admitted, which is what this test is about.
    response = client.post("/api/v1/embeddings", json={"model": EMBED_ALIAS, "input": "x"})
    assert response.status_code == 502
    assert response.json()["error"]["type"] == "server_error"


# --- what changes shared state needs the token -----------------------------------------------


@pytest.mark.parametrize("prefix", ["/api/v1", "/v1", "/api/v0"])
def test_a_load_that_restarts_a_model_is_refused_without_the_token(guarded, prefix) -> None:
    client, backend = guarded
    assert_forbidden(client.post(prefix + "/load", json=RESTART), "Authorization: Bearer")
    assert backend.starts == []  # nothing was restarted
    assert backend.get(SMOLLM2).args.slot_prompt_similarity == 0.5


@pytest.mark.parametrize(
    "authorization", [f"Bearer {'x' * 40}", f"Basic {TOKEN}", TOKEN, "Bearer ", f"Bearer {TOKEN}x"]
)
def test_a_wrong_or_malformed_token_is_refused(guarded, authorization) -> None:
    client, backend = guarded
    response = client.post("/api/v1/load", json=RESTART, headers={"Authorization": authorization})
    assert_forbidden(response, "Authorization: Bearer")
    assert backend.starts == []


def test_a_larger_window_is_a_restart_and_needs_the_token(guarded) -> None:
    client, backend = guarded
    refused = client.post("/api/v1/load", json={"model_name": CHAT_ALIAS, "ctx_size": 131072})
    assert_forbidden(refused, "admin token")
    assert backend.starts == []


def test_the_admin_token_restarts_the_model(guarded) -> None:
    client, backend = guarded
    response = client.post("/api/v1/load", json=RESTART, headers=ADMIN)
    assert response.status_code == 200 and response.json()["started"] is True
    assert backend.starts == [
        (SMOLLM2.name, 65536, GAIA_CHAT_FLAGS.replace("0.5", "0.25"))
    ]


def test_bearer_scheme_is_case_insensitive(guarded) -> None:
    client, backend = guarded
    response = client.post(
        "/api/v1/load", json=RESTART, headers={"Authorization": f"bearer {TOKEN}"}
    )
    assert response.status_code == 200 and len(backend.starts) == 1


@pytest.mark.parametrize("route", ["params", "delete"])
def test_unimplemented_state_changing_routes_are_403_then_501(guarded, route) -> None:
    client, _ = guarded
    assert_forbidden(client.post(f"/api/v1/{route}", json={}), "Authorization: Bearer")
    implemented = client.post(f"/api/v1/{route}", json={}, headers=ADMIN)
    assert implemented.status_code == 501
    assert implemented.json()["error"]["code"] == "not_implemented"


def test_without_a_configured_token_nobody_may_restart(tmp_path: Path) -> None:
    client, backend = make_client(tmp_path, None)
    with client:
        response = client.post("/api/v1/load", json=RESTART, headers=ADMIN)
        assert_forbidden(response, f"started without {ADMIN_TOKEN_ENV}")
        # ...and GAIA's no-op load still works.
        assert client.post("/api/v1/load", json={"model_name": CHAT_ALIAS}).status_code == 200
    assert backend.starts == []


# --- where the token comes from ---------------------------------------------------------------


def test_token_comes_from_the_environment() -> None:
    assert token_from_environment({ADMIN_TOKEN_ENV: f"  {TOKEN}\n"}) == TOKEN
    assert token_from_environment({ADMIN_TOKEN_ENV: ""}) is None
    assert token_from_environment({}) is None


def test_a_short_token_is_one_clear_error() -> None:
    with pytest.raises(AdminTokenError, match=f"{ADMIN_TOKEN_ENV} is 5 characters long"):
        token_from_environment({ADMIN_TOKEN_ENV: "short"})


def test_server_options_carry_the_token(monkeypatch) -> None:
    monkeypatch.setenv(ADMIN_TOKEN_ENV, TOKEN)
    assert parse_args([]).admin_token == TOKEN
    monkeypatch.delenv(ADMIN_TOKEN_ENV)
    assert parse_args([]).admin_token is None


def test_a_short_token_stops_the_server_at_startup_with_exit_2(monkeypatch, capsys) -> None:
    monkeypatch.setenv(ADMIN_TOKEN_ENV, "short")
    with pytest.raises(SystemExit) as stopped:
        parse_args([])
    assert stopped.value.code == 2
    assert ADMIN_TOKEN_ENV in capsys.readouterr().err


@pytest.mark.parametrize(
    ("header", "expected"),
    [(None, None), ("", None), ("Bearer abc", "abc"), ("BEARER  abc ", "abc"), ("Token abc", None)],
)
def test_bearer_reads_only_bearer_headers(header, expected) -> None:
    assert bearer(header) == expected
