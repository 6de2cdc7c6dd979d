"""Which nodes may take a job and where each job ran: the `--on` selection and cluster.json.

No Ray here: `trialbox run --cluster` parses its `--on` values, and tests read cluster.json,
without the optional extra.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from runner.cluster._node import DEVICE_LABEL, DRIVER_LABEL, FINGERPRINT_LABEL, NODE_LABEL

# What `--on KEY=VALUE` may select on, and the node label each key reads.
SELECTORS = {"device": DEVICE_LABEL, "fingerprint": FINGERPRINT_LABEL, "driver": DRIVER_LABEL,
             "node": NODE_LABEL}


class ClusterError(RuntimeError):
    """The cluster cannot run this selection; the message names the cause and the fix."""


class ClusterNode(BaseModel):
    """A node as the controller saw it when the run started."""

    node_id: str = Field(description="Ray node id")
    name: str = Field(description="the node's name (label trialbox-node)")
    device: str = Field(description="the node's stack device (label trialbox-device)")
    slots: int = Field(description="its `trialbox` resource: sandboxes at once")
    fingerprint_id: str = Field(description="its hardware fingerprint label")
    driver: str = Field(description="its driver build label")


class Attempt(BaseModel):
    """One try at a job: where it ran and whether its node was lost."""

    attempt: int = Field(description="1, or 2 for the retry")
    node_id: str | None = Field(default=None, description="where it ran (None: lost before it started)")
    node_name: str | None = Field(default=None, description="that node's name")
    lost: bool = Field(description="the node or its worker died before the job returned")
    error: str | None = Field(default=None, description="Ray's description of the loss")


class Placement(BaseModel):
    """Where one job ran and what the cluster cost it."""

    key: str = Field(description="the job key (scenario id, plus __trialN)")
    node_name: str | None = Field(default=None, description="the node that returned the result")
    device: str | None = Field(default=None, description="that node's device")
    fingerprint_id: str | None = Field(default=None, description="that node's fingerprint label")
    attempts: list[Attempt] = Field(default_factory=list, description="every try, in order")
    converse_s: float | None = Field(default=None, description="seconds on the node")
    round_trip_s: float | None = Field(default=None, description="seconds from submit to result")
    overhead_s: float | None = Field(default=None, description="round trip minus node time: Ray's cost")


class ClusterLog(BaseModel):
    """cluster.json: the nodes a run saw and where each job ran."""

    selector: dict[str, str] = Field(default_factory=dict, description="the --on selection")
    pinned_node: str | None = Field(default=None, description="--per-node: the one node used")
    nodes: list[ClusterNode] = Field(default_factory=list, description="matching nodes at start")
    jobs: dict[str, Placement] = Field(default_factory=dict, description="job key → placement")


def parse_on(values: list[str]) -> dict[str, str]:
    """`--on device=rocm --on driver=…` → {"device": "rocm", …}; unknown keys are refused."""
    on: dict[str, str] = {}
    for value in values:
        key, sep, wanted = value.partition("=")
        if not sep or key not in SELECTORS or not wanted:
            raise ClusterError(f"--on {value!r}: use KEY=VALUE with KEY one of "
                               f"{', '.join(SELECTORS)} (e.g. --on device=rocm)")
        on[key] = wanted
    return on
