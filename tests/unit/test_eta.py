"""The ETA model on a run with recorded per-scenario times, and a planted doubling."""

from runner.run.eta import EtaModel, Work

# A recorded shape: 40 scenarios, short chats, and one long document among them (times in s,
# as a GAIA-91 run's scorecard gave them: turns ~6.7 s each, the big PDF ~46 s/MB).
PLAN = [Work(f"s{i:02d}", turns=3 + i % 4, document_bytes=6_200_000 if i == 30 else 200_000)
        for i in range(40)]
REAL = {w.key: 10 + 7.5 * w.turns + 50 * w.document_bytes / 1e6 for w in PLAN}


def replay(model: EtaModel, upto: int) -> float:
    now = 0.0
    for work in PLAN[:upto]:
        model.started(work.key, now)
        now += REAL[work.key]
        model.finished(work.key, REAL[work.key])
    return model.remaining_s(now)


def test_eta_after_the_first_5_percent_is_within_30_percent_of_the_real_remaining() -> None:
    upto = 2  # 5 % of 40
    eta = replay(EtaModel(PLAN), upto)
    real_left = sum(REAL[w.key] for w in PLAN[upto:])
    assert abs(eta - real_left) / real_left < 0.30


def test_the_eta_counts_down_while_a_scenario_runs() -> None:
    model = EtaModel(PLAN)
    model.started("s00", 0.0)
    assert model.remaining_s(30.0) < model.remaining_s(0.0)


def test_a_run_whose_remaining_work_doubles_doubles_its_eta() -> None:
    doubled = PLAN[:2] + [Work(w.key + "b", w.turns, w.document_bytes) for w in PLAN[2:]] + PLAN[2:]
    one, two = replay(EtaModel(PLAN), 2), replay(EtaModel(doubled), 2)
    assert 1.8 < two / one < 2.2
