"""The default suite's smaller categories, run locally and spread over the real local Ray
cluster (see conftest): the cluster run uses both nodes and its scorecard equals the local
run's in everything but timings and node names.

personality and vision: the smallest categories of eval/scenarios (three scenarios each, one
turn, verbatim user messages, so the scripted simulator needs no model)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from local_cluster import ROOT, LocalCluster

from runner.cluster import ClusterLog, run_on_cluster
from runner.records.status import Status
from runner.report import Scorecard
from runner.run.launch import run as local_run
from runner.run.settings import RunSettings, Selection

pytestmark = [pytest.mark.containers, pytest.mark.timeout(2400)]
CATEGORIES = ["personality", "vision"]


def _default_suite(settings: RunSettings) -> RunSettings:
    settings.suite_paths = [ROOT / "eval" / "scenarios"]
    settings.corpus_root = ROOT / "eval" / "corpus"
    settings.selection = Selection(categories=CATEGORIES)
    return settings


def _verdicts(card: Scorecard) -> dict[str, tuple[str, list[list[tuple[str, bool | None]]]]]:
    return {r.key: (r.status.value, [[(c.type, c.passed) for c in t.checks] for t in r.turns])
            for r in card.scenarios}


def test_smaller_default_categories_spread_over_both_nodes_as_a_local_run(
        cluster: LocalCluster, tmp_path: Path) -> None:
    local = _default_suite(cluster.settings(tmp_path / "local"))
    local.concurrency = 2
    local_card = asyncio.run(local_run(local, print))

    spread = _default_suite(cluster.settings(tmp_path / "cluster"))
    card = asyncio.run(run_on_cluster(spread, cluster.address, {}, print))
    log = ClusterLog.model_validate_json((spread.run_dir / "cluster.json").read_text())

    assert {r.category for r in card.scenarios} == set(CATEGORIES)
    assert len(card.scenarios) == 6
    assert {j.node_name for j in log.jobs.values()} == {"alpha", "beta"}
    assert sorted(log.jobs) == sorted(r.key for r in card.scenarios)
    assert _verdicts(card) == _verdicts(local_card)
    assert card.summary == local_card.summary  # counters and rates: no timings in it
    assert [r.key for r in card.scenarios] == [r.key for r in local_card.scenarios]
    assert all(r.status is not Status.INFRA_ERROR for r in card.scenarios), _verdicts(card)
