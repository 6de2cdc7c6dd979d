"""Past one machine: runs spread over a Ray cluster of appliances (optional extra `cluster`).

`join`/`leave` make this machine a node; `ClusterConversations` is the engine's conversation
source that runs each job on a node; `run_on_cluster`/`run_per_node` are `trialbox run
--cluster` and `--per-node`. Only this package imports ray.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runner.cluster._node import NodeConfig, NodeError, NodeState, join, leave, load_node_config
from runner.cluster._placements import ClusterError, ClusterLog, parse_on
from runner.system.lazy import lazy_names

if TYPE_CHECKING:
    from runner.cluster._conversations import ClusterConversations
    from runner.cluster._run import PerNodeResult, run_blocking, run_on_cluster, run_per_node

# Importing these imports ray; `node join` and `node leave` only need the `ray` command.
_LAZY = {"ClusterConversations": "_conversations", "run_on_cluster": "_run", "run_per_node": "_run",
         "PerNodeResult": "_run", "run_blocking": "_run"}


__getattr__ = lazy_names(__name__, _LAZY)


__all__ = [
    "ClusterConversations",
    "ClusterError",
    "ClusterLog",
    "NodeConfig",
    "NodeError",
    "NodeState",
    "PerNodeResult",
    "join",
    "leave",
    "load_node_config",
    "parse_on",
    "run_blocking",
    "run_on_cluster",
    "run_per_node",
]
