"""A GAIA user's own agents in real Docker sandboxes (the agent-ui and llm-cpu images).

The same small scenario (GAIA's `agent_type: doc`, mapped with --agent-map) runs once under each
of our two fixture agents: a document agent built on GAIA's RAG mixin and an agent with no tools.
The shared LLM server forces the first model call of each turn to `query_documents` whenever a
request offers that tool (SmolLM2-135M never picks a tool by itself), so the document agent's
tool path really runs, and the tool-less agent — offered nothing — makes no call at all.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from runner.conversation.agents import AgentRegistry
from runner.conversation.simulate import ScriptedSimulator
from runner.conversation.target import TargetError, run_conversation
from runner.records.evidence import Evidence
from runner.records.transcript import Transcript
from runner.scenarios import load_suite

if TYPE_CHECKING:
    from labelled_containers import LlmCpu

docker = pytest.importorskip("docker")

pytestmark = [pytest.mark.containers, pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "fixtures" / "engine_suite"
AGENTS = ROOT / "tests" / "fixtures" / "agents"
RUN_ID = f"pytest-agents-{int(time.time())}"
AGENT_UI = "trialbox/agent-ui:dev"


def _client():  # type: ignore[no-untyped-def]
    client = docker.from_env()
    client.ping()
    for image in (AGENT_UI, "trialbox/llm-cpu:dev"):
        try:
            client.images.get(image)
        except docker.errors.ImageNotFound:
            pytest.fail(f"{image} is not built — `make images` (make test builds them first)")
    return client


@pytest.fixture(scope="module")
def llm_cpu_environment() -> dict[str, str]:
    """The module's llm-cpu server has the forced-tool switch on (see the docstring)."""
    return {"TRIALBOX_LLM_FORCE_TOOL": "query_documents"}


@pytest.fixture(scope="module", autouse=True)
def nothing_left_behind() -> Iterator[None]:
    """The images are there before anything starts; nothing under RUN_ID is left after."""
    client = _client()
    yield
    leftovers = client.containers.list(all=True, filters={"label": f"trialbox.run={RUN_ID}"})
    leftovers += client.networks.list(filters={"label": f"trialbox.run={RUN_ID}"})
    assert leftovers == [], f"left behind: {[x.name for x in leftovers]}"


def doc_scenario():  # type: ignore[no-untyped-def]
    """lighthouse_fuel, first turn only, written the way GAIA's repository writes it."""
    suite = load_suite([SUITE / "scenarios"], SUITE / "corpus")
    base = next(s for s in suite.scenarios if s.id == "lighthouse_fuel")
    return base.model_copy(update={"agent_type": "doc", "turns": base.turns[:1]})


def converse(llm: str, agent_id: str) -> Transcript:
    """Run the doc scenario in a fresh Docker sandbox as ``agent_id``."""
    from runner.sandbox.docker import DockerBackend

    scenario = doc_scenario()
    backend = DockerBackend(RUN_ID, llm, SUITE / "corpus", image=AGENT_UI, agent_dirs=[AGENTS])

    async def run() -> Transcript:
        async with backend.open(f"{scenario.id}-{agent_id}") as box:
            return await run_conversation(box, scenario, ScriptedSimulator(), device="cpu",
                                          turn_timeout_s=300, agent_id=agent_id)

    return asyncio.run(run())


@pytest.fixture(scope="module")
def under_docs_helper(llm_cpu: LlmCpu) -> Transcript:
    # As `--agent-dir tests/fixtures/agents --agent-map doc=docs_helper` picks it.
    return converse(llm_cpu.name, AgentRegistry([AGENTS], agent_map={"doc": "docs_helper"}).resolve("doc"))


@pytest.fixture(scope="module")
def under_plain_talker(llm_cpu: LlmCpu) -> Transcript:
    return converse(llm_cpu.name, AgentRegistry([AGENTS], agent_map={"doc": "plain_talker"}).resolve("doc"))


def test_the_transcript_names_the_agent_and_the_gaia_version(
    under_docs_helper: Transcript, under_plain_talker: Transcript
) -> None:
    from runner.stack.images import image_gaia

    labelled = image_gaia(AGENT_UI)["gaia_version"]
    assert labelled == "0.25.1"  # what the image says it installed...
    for transcript, agent in ((under_docs_helper, "docs_helper"), (under_plain_talker, "plain_talker")):
        assert transcript.agent_id == agent
        assert transcript.gaia_version == labelled  # ...is what its Agent UI reports
        [record] = transcript.turns
        assert record.error is None, record.error
        assert record.answer.strip()


def test_the_document_agent_searches_and_the_toolless_one_makes_no_call(
    under_docs_helper: Transcript, under_plain_talker: Transcript
) -> None:
    searched = Evidence.from_transcript(under_docs_helper).turns[0]
    assert searched.tool_names[:1] == ["query_documents"], searched.tool_names
    assert under_docs_helper.indexed[0].chunks >= 1
    assert Evidence.from_transcript(under_plain_talker).turns[0].calls == []
    # The UI's own session-indexing step is not the agent's either: nothing at all was called.
    assert under_plain_talker.turns[0].tool_calls == []


def test_gaia_refuses_an_unmapped_agent_type_naming_the_same_ids_as_our_registry(
    llm_cpu: LlmCpu,
) -> None:
    """Without a mapping AgentRegistry stops `doc` before anything starts; asked anyway, the
    Agent UI refuses it too and lists exactly the ids the registry predicted."""
    registry = AgentRegistry([AGENTS])
    [problem] = registry.problems([doc_scenario()])
    assert "'doc'" in problem and "--agent-map doc=<id>" in problem
    with pytest.raises(TargetError) as refused:
        converse(llm_cpu.name, "doc")
    message = str(refused.value)
    assert "Unknown agent_type 'doc'" in message
    listed = message.split("Registered agent ids: ", 1)[1].split(".", 1)[0]
    assert sorted(listed.split(", ")) == registry.ids


def test_user_agent_folders_are_read_only_in_the_sandbox(llm_cpu: LlmCpu) -> None:

    from runner.sandbox.docker import DockerBackend

    model = "SmolLM2-135M-Instruct-GGUF"
    backend = DockerBackend(RUN_ID, llm_cpu.name, SUITE / "corpus", image=AGENT_UI,
                            agent_dirs=[AGENTS], agent_model=model)

    async def probe() -> tuple[int, str, bool, str]:
        async with backend.open("read_only_probe", memory=True) as box:
            write = box.ui.exec_run(["touch", "/home/gaia/.gaia/agents/docs_helper/x"])
            link = box.ui.exec_run(["readlink", "/home/gaia/.gaia/agents/docs_helper"]).output.decode()
            env = box.ui.exec_run(["sh", "-c", "grep -l GAIA_MEMORY_ADMIN=1 /proc/[0-9]*/environ"])
            # The UI listens on its container's loopback only: trialbox reaches it by docker exec.
            settings = (await box.ui_request("GET", "/api/settings")).json()
            return write.exit_code, link.strip(), env.exit_code == 0, settings["custom_model"]

    exit_code, link, memory_on, custom_model = asyncio.run(probe())
    assert exit_code != 0, "the sandbox could write into the user's agent folder"
    assert link == "/opt/trialbox/agent-dirs/0/docs_helper"
    assert memory_on  # open(memory=True) started the Agent UI with memory on
    assert custom_model == model  # --agent-model is the Agent UI's own model override


def test_agent_ui_image_from_a_wheel_is_tagged_and_labelled_with_its_gaia(tmp_path: Path) -> None:
    """`--gaia path/to/amd_gaia-*.whl`: the host downloads the rest, the build installs offline."""
    import shutil
    import subprocess
    import sys

    from runner.stack.images import GAIA_SPEC_LABEL, build_agent_ui_image, image_gaia, repo_root

    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest",
                    str(tmp_path), "amd-gaia==0.25.1"], check=True)  # fmt: skip
    [wheel] = tmp_path.glob("amd_gaia-*.whl")
    tag, version = build_agent_ui_image(str(wheel))
    client = _client()
    try:
        assert version == "0.25.1"
        assert tag.startswith("trialbox/agent-ui:gaia-0.25.1-wheel-") and tag != AGENT_UI
        assert image_gaia(tag) == {"gaia_version": "0.25.1", "gaia_spec": f"wheel:{wheel}"}
        assert client.images.get(tag).labels[GAIA_SPEC_LABEL] == f"wheel:{wheel}"
        reported = client.containers.run(
            tag, entrypoint=["python", "-c", "import gaia.version as v; print(v.__version__)"],
            remove=True, labels={"trialbox.run": RUN_ID},
        ).decode().strip()  # fmt: skip
        assert reported == "0.25.1"
    finally:
        client.images.remove(tag, force=True)
        shutil.rmtree(repo_root() / ".cache" / "build" / f"agent-ui-{tag.rsplit(':', 1)[1]}",
                      ignore_errors=True)


def test_asking_for_an_image_that_is_not_built_names_the_fix() -> None:
    from runner.stack.images import ImageBuildError, image_gaia

    with pytest.raises(ImageBuildError, match="is not built"):
        image_gaia("trialbox/agent-ui:gaia-0.0.0-never-built")
