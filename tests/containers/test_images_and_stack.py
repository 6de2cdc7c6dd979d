"""Real Docker: the images build, the compose stack's LLM answers, cleanup leaves nothing behind.

Everything created here carries ``trialbox.run=pytest-<random>`` and is removed by label at the
end of each test, so the shared engine keeps only what it had before.
"""

from __future__ import annotations

import json
import secrets
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from docker.errors import DockerException

from runner.run.cleanup import cleanup
from runner.stack.compose import (
    ComposeError,
    compose_files,
    down,
    project_name,
    server_for,
    up_llm,
    wait_healthy,
)
from runner.stack.engine import compose_version
from runner.stack.images import (
    BASE_IMAGE,
    IMAGES,
    ImageBuildError,
    build_image,
    ensure_base_image,
    image_tag,
    repo_root,
    stage_tag,
)
from runner.stack.lemonade_image import LEMONADE, SID_BASE_IMAGE
from runner.system.ports import free_port

pytestmark = pytest.mark.containers

ROOT = repo_root()


@pytest.fixture(scope="module")
def client() -> Iterator[docker.DockerClient]:
    try:
        client = docker.from_env()
        client.ping()
    except DockerException as error:
        pytest.skip(f"no Docker engine answers ({error}); run scripts/ensure-docker")
    yield client
    client.close()


@pytest.fixture
def run_id(client: docker.DockerClient) -> Iterator[str]:
    """A run id of our own; whatever carries it is removed after the test, pass or fail."""
    run = f"pytest-{secrets.token_hex(4)}"
    yield run
    cleanup(run, client)


def labelled(client: docker.DockerClient, run: str) -> dict[str, list[str]]:
    filters = {"label": f"trialbox.run={run}"}
    return {
        "containers": [c.name for c in client.containers.list(all=True, filters=filters)],
        "networks": [n.name for n in client.networks.list(filters=filters)],
        "volumes": [v.name for v in client.volumes.list(filters=filters)],
    }


def require_image(client: docker.DockerClient, name: str) -> str:
    tag = image_tag(name)
    try:
        client.images.get(tag)
    except DockerException:
        build_image(name)
    return tag


# ---- images -------------------------------------------------------------------------------


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", IMAGES)
def test_image_builds_with_its_label(client: docker.DockerClient, name: str) -> None:
    built = build_image(name)
    image = client.images.get(built.tag)
    assert image.id == built.image_id
    assert image.labels["trialbox.image"] == name
    # Lemonade's packages are in Debian sid only: that image has its own base.
    expected_base = SID_BASE_IMAGE if name == LEMONADE else ensure_base_image()
    assert image.labels["trialbox.base"] == expected_base


TWO_STAGE = """\
ARG BASE_IMAGE
FROM ${BASE_IMAGE} AS build
LABEL trialbox.image=NAME trialbox.stage=build
RUN echo STAGE > /stage.txt
FROM ${BASE_IMAGE}
COPY --from=build /stage.txt /stage.txt
COPY images/NAME/payload.txt /payload.txt
"""


@pytest.mark.timeout(600)
def test_a_rebuild_checks_inputs_tags_its_stage_and_leaves_nothing_dangling(
    client: docker.DockerClient, tmp_path: Path
) -> None:
    # A two-stage image in a checkout of its own, built by the real code path (the real
    # prepare-build-context script included); its name is unique, so only it is touched.
    name = f"pytest-{secrets.token_hex(4)}"
    folder = tmp_path / "images" / name
    folder.mkdir(parents=True)
    (tmp_path / "scripts").mkdir()
    script = tmp_path / "scripts" / "prepare-build-context"
    script.write_bytes((ROOT / "scripts" / "prepare-build-context").read_bytes())
    script.chmod(0o755)

    def write(stage: str, payload: str) -> None:
        (folder / "Dockerfile").write_text(TWO_STAGE.replace("NAME", name).replace("STAGE", stage))
        (folder / "payload.txt").write_text(payload)

    def dangling() -> list[str]:
        found = client.api.images(filters={"dangling": True, "label": f"trialbox.image={name}"})
        return [image["Id"] for image in found]

    base = ensure_base_image()
    try:
        write("one", "first")
        first = build_image(name, root=tmp_path, base=base)
        assert first.rebuilt and first.labels["trialbox.inputs"]
        stage = client.images.get(stage_tag(first.tag, "build"))
        assert stage.labels["trialbox.stage"] == "build"

        again = build_image(name, root=tmp_path, base=base)
        assert not again.rebuilt and again.image_id == first.image_id

        write("one", "second")  # the final stage changes: the old image must go
        second = build_image(name, root=tmp_path, base=base)
        assert second.rebuilt and first.image_id in second.removed
        write("two", "second")  # the builder stage changes: its old copy must go too
        third = build_image(name, root=tmp_path, base=base)
        assert stage.id in third.removed and second.image_id in third.removed
        assert dangling() == []
    finally:
        for tag in (image_tag(name), stage_tag(image_tag(name), "build")):
            try:
                client.images.remove(tag, force=True)
            except DockerException:
                pass
        for image_id in dangling():
            client.images.remove(image_id, force=True)


def test_a_failing_build_quotes_the_engines_step_output(
    client: docker.DockerClient, tmp_path: Path
) -> None:
    name = f"pytest-{secrets.token_hex(4)}"
    (tmp_path / "images" / name).mkdir(parents=True)
    (tmp_path / "images" / name / "Dockerfile").write_text(
        "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nRUN echo the-real-cause && exit 3\n")
    (tmp_path / "scripts").mkdir()
    script = tmp_path / "scripts" / "prepare-build-context"
    script.write_bytes((ROOT / "scripts" / "prepare-build-context").read_bytes())
    script.chmod(0o755)
    with pytest.raises(ImageBuildError) as caught:
        build_image(name, root=tmp_path, base=ensure_base_image())
    assert "the-real-cause" in str(caught.value) and "non-zero code: 3" in str(caught.value)
    with pytest.raises(DockerException):
        client.images.get(image_tag(name))  # nothing tagged


def test_base_image_has_what_every_image_needs(client: docker.DockerClient, run_id: str) -> None:
    ensure_base_image()
    script = (
        "import sqlite3, venv, ssl, shutil, ctypes.util;"
        "assert shutil.which('tini') and shutil.which('update-ca-certificates');"
        "assert ctypes.util.find_library('gomp');"
        "print('ok')"
    )
    out = client.containers.run(
        BASE_IMAGE, ["python3", "-c", script], labels={"trialbox.run": run_id}, remove=True
    )
    assert out.decode().strip() == "ok"


def test_runner_image_runs_trialbox_as_a_non_root_user(client: docker.DockerClient) -> None:
    config = client.images.get(require_image(client, "runner")).attrs["Config"]
    assert config["Entrypoint"] == ["trialbox"]
    assert config["User"] not in ("", "root", "0")
    assert config["Env"] and "TRIALBOX_IN_CONTAINER=1" in config["Env"]


def test_runner_user_reaches_the_engine_through_the_mounted_socket(
    client: docker.DockerClient, run_id: str
) -> None:
    """What compose does for the runner: socket mount + the socket's numeric GID, no root."""
    image = require_image(client, "runner")
    socket_path = "/var/run/docker.sock"
    gid = str(Path(socket_path).stat().st_gid)
    probe = "import docker, os; print(os.getuid(), docker.from_env().version()['ApiVersion'])"
    out = client.containers.run(
        image,
        entrypoint=["python", "-c", probe],
        command=[],
        volumes={socket_path: {"bind": socket_path, "mode": "rw"}},
        group_add=[gid],
        labels={"trialbox.run": run_id},
        remove=True,
    )
    uid, api = out.decode().split()
    assert uid == "10001"
    assert api == client.version()["ApiVersion"]


# ---- compose files ------------------------------------------------------------------------


def rendered(device: str | None, server: str | None = None) -> dict:
    files = ([ROOT / "compose" / "compose.yaml"] if device is None
             else compose_files(device, server=server_for(device, server)))
    cmd = ["docker", "compose", "-p", "trialbox"]
    for path in files:
        cmd += ["-f", str(path)]
    cmd += ["--profile", "run", "config", "--format", "json"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize(("device", "server"), [
    (None, None), ("cpu", "llm-cpu"), ("cpu", "lemonade"), ("rocm", None), ("npu", None),
    ("vulkan", None)])
def test_every_compose_combination_is_valid_and_labelled(device: str | None, server: str | None) -> None:
    if compose_version() is None:
        pytest.skip("docker compose v2 is missing; run scripts/ensure-docker")
    config = rendered(device, server)
    llm = config["services"]["llm"]
    assert [(p["host_ip"], p["target"]) for p in llm["ports"]] == [("127.0.0.1", 13305)]
    for name, service in config["services"].items():
        assert service["init"] is True, name
        assert service["labels"]["trialbox.run"] == "stack", name
    for network in config["networks"].values():
        assert network["labels"]["trialbox.run"] == "stack"
    for volume in config.get("volumes", {}).values():
        assert volume["labels"]["trialbox.run"] == "stack"
    runner = config["services"]["runner"]
    assert runner["profiles"] == ["run"]
    targets = {v["target"]: v for v in runner["volumes"]}
    assert targets["/opt/trialbox/eval"]["read_only"] is True
    assert "/var/run/docker.sock" in targets and "/results" in targets


def test_rocm_overlay_passes_gpu_devices_and_the_pinned_lemonade_image() -> None:
    if compose_version() is None:
        pytest.skip("docker compose v2 is missing")
    services = rendered("rocm")["services"]
    # The real Lemonade holds the devices; the `llm` name sandboxes reach is the front door in
    # front of it (the meter and the admin gate), and only the front door publishes a port.
    lemonade, front_door = services["lemonade"], services["llm"]
    assert lemonade["image"].startswith("ghcr.io/lemonade-sdk/lemonade-server:v")
    assert {d["source"] for d in lemonade["devices"]} == {"/dev/kfd", "/dev/dri"}
    assert set(lemonade["group_add"]) == {"video", "render"}
    assert lemonade["user"] == "10001"
    assert not lemonade.get("ports")
    mounts = {v["target"] for v in lemonade["volumes"]}
    assert "/opt/lemonade/.cache/huggingface" in mounts and "/opt/lemonade/llama" in mounts
    assert front_door["image"].startswith("trialbox/llm-cpu")
    assert front_door["command"][:2] == ["--upstream", "http://lemonade:13305"]
    assert not front_door.get("devices")


def test_vulkan_overlay_passes_only_the_render_nodes_and_our_vulkan_image() -> None:
    if compose_version() is None:
        pytest.skip("docker compose v2 is missing")
    services = rendered("vulkan")["services"]
    lemonade, front_door = services["lemonade"], services["llm"]
    assert lemonade["image"] == "trialbox/lemonade:vulkan"
    assert [d["source"] for d in lemonade["devices"]] == ["/dev/dri"]  # no /dev/kfd: not ROCm
    assert set(lemonade["group_add"]) == {"video", "render"}
    assert lemonade["read_only"] is True and lemonade["cap_drop"] == ["ALL"]
    assert front_door["command"][:2] == ["--upstream", "http://lemonade:13305"]
    assert front_door["labels"]["trialbox.llm-server"] == "lemonade"


def test_lemonade_on_the_cpu_is_the_real_server_behind_the_front_door() -> None:
    if compose_version() is None:
        pytest.skip("docker compose v2 is missing")
    services = rendered("cpu", "lemonade")["services"]
    lemonade, front_door = services["lemonade"], services["llm"]
    assert lemonade["image"] == "trialbox/lemonade:dev" and not lemonade.get("devices")
    assert not lemonade.get("ports") and lemonade["networks"] == {"stack": None}
    assert lemonade["read_only"] is True and lemonade["user"] == "10001"
    assert front_door["image"].startswith("trialbox/llm-cpu")
    assert front_door["command"][:2] == ["--upstream", "http://lemonade:13305"]
    assert front_door["depends_on"]["lemonade"]["condition"] == "service_healthy"


def test_npu_overlay_passes_the_accel_node_with_unlimited_memlock() -> None:
    if compose_version() is None:
        pytest.skip("docker compose v2 is missing")
    services = rendered("npu")["services"]
    lemonade = services["lemonade"]
    assert [d["source"] for d in lemonade["devices"]] == ["/dev/accel/accel0"]
    assert lemonade["ulimits"]["memlock"] == {"soft": -1, "hard": -1}
    assert services["llm"]["command"][:2] == ["--upstream", "http://lemonade:13305"]


# ---- the stack ----------------------------------------------------------------------------

CHAT_FROM_INSIDE = """
import json, urllib.request
base = "http://llm:13305/api/v1"
models = json.load(urllib.request.urlopen(base + "/models", timeout=30))["data"]
chat = next(m["id"] for m in models if "embed" not in m["id"].lower() and "minilm" not in m["id"].lower())
body = {"model": chat, "max_tokens": 16, "temperature": 0,
        "messages": [{"role": "user", "content": "Say hello."}]}
request = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
print(json.dumps(json.load(urllib.request.urlopen(request, timeout=120))))
"""


@pytest.mark.timeout(600)
def test_llm_service_comes_up_healthy_answers_inside_the_network_and_cleans_up(
    client: docker.DockerClient, run_id: str
) -> None:
    image = require_image(client, "llm-cpu")
    port = free_port()
    try:
        stack = up_llm("cpu", run_id=run_id, port=port, timeout_s=240)
        container = client.containers.get(stack.container)
        assert container.labels["trialbox.run"] == run_id
        assert container.labels["trialbox.device"] == "cpu"
        assert container.attrs["State"]["Health"]["Status"] == "healthy"

        network = f"{project_name(run_id)}_stack"
        out = client.containers.run(
            image,
            entrypoint=["python3", "-c", CHAT_FROM_INSIDE],
            command=[],
            network=network,
            labels={"trialbox.run": run_id},
            remove=True,
        )
        reply = json.loads(out.decode().strip().splitlines()[-1])
        assert reply["choices"][0]["message"]["content"].strip()
        assert reply["usage"]["completion_tokens"] > 0
    finally:
        down("cpu", run_id=run_id, volumes=True)
    report = cleanup(run_id, client)
    assert report.failures == []
    assert labelled(client, run_id) == {"containers": [], "networks": [], "volumes": []}


def test_up_refuses_a_port_held_by_another_program(
    client: docker.DockerClient, run_id: str
) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        with pytest.raises(ComposeError, match=rf"port {port} .* already in use"):
            up_llm("cpu", run_id=run_id, port=port, timeout_s=5)
    assert labelled(client, run_id)["containers"] == []


def test_wait_healthy_fails_fast_with_the_containers_last_log_lines(
    client: docker.DockerClient, run_id: str
) -> None:
    ensure_base_image()
    container = client.containers.run(
        BASE_IMAGE,
        ["sh", "-c", "echo model file not found; sleep 120"],
        detach=True,
        init=True,
        labels={"trialbox.run": run_id},
        healthcheck={"test": ["CMD", "false"], "interval": 500_000_000, "retries": 1},
    )
    with pytest.raises(ComposeError, match=r"(?s)'unhealthy'.*model file not found"):
        wait_healthy(container.id, timeout_s=60)


def test_cleanup_removes_only_what_carries_the_run_label(
    client: docker.DockerClient, run_id: str
) -> None:
    ensure_base_image()
    ours = {"trialbox.run": run_id}
    network = client.networks.create(f"{run_id}-net", labels=ours)
    client.volumes.create(f"{run_id}-vol", labels=ours)
    client.containers.run(
        BASE_IMAGE, ["sleep", "120"], detach=True, init=True, labels=ours, network=network.name
    )
    other_run = client.networks.create(
        f"{run_id}-other", labels={"trialbox.run": f"{run_id}-other"}
    )
    unlabelled = client.volumes.create(f"{run_id}-unlabelled")
    try:
        report = cleanup(run_id, client)
        assert (len(report.containers), len(report.networks), len(report.volumes)) == (1, 1, 1)
        assert labelled(client, run_id) == {"containers": [], "networks": [], "volumes": []}
        client.networks.get(other_run.id)  # another run's network survives
        client.volumes.get(unlabelled.name)  # an unlabelled volume survives
    finally:
        other_run.remove()
        unlabelled.remove()
