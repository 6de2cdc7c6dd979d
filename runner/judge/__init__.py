"""Judges: model-graded turns, verdicts and claims; the calibration gate; the judge-call cache.

Typical use (the engine):

    choices = from_env_and_flags(judge_url=flags.judge_url)   # print choices.header_lines()
    judge = await open_judge(choices.judge)  # None -> NOT_JUDGED; raises CalibrationFailed
    if judge is not None:
        judgments = await judge.judge(scenario, transcript)  # raises JudgeError, never guesses
"""

from runner.judge._anthropic import DEFAULT_MODEL, AnthropicBackend
from runner.judge._ask import BackendReply, StructuredBackend, StructuredRequest
from runner.judge._cache import CacheStats, JudgeCache, default_cache_dir
from runner.judge._calibration import (
    DEFAULT_DEADLINE_S,
    CalibratedJudge,
    CalibrationReport,
    CalibrationSet,
    ClaimExample,
    ExampleResult,
    RubricExample,
    calibrate,
    calibrated,
    load_calibration,
)
from runner.judge._config import (
    JudgeConfig,
    ProviderChoices,
    ProviderConfigError,
    from_env_and_flags,
    make_judge,
    open_judge,
)
from runner.judge._errors import (
    CalibrationFailed,
    JudgeError,
    JudgeServerError,
    JudgeUnavailable,
    JudgeUnreachable,
)
from runner.judge._judge import Judge, ModelJudge
from runner.judge._openai import OpenAIBackend

__all__ = [
    "DEFAULT_DEADLINE_S",
    "DEFAULT_MODEL",
    "AnthropicBackend",
    "BackendReply",
    "CacheStats",
    "CalibratedJudge",
    "CalibrationFailed",
    "CalibrationReport",
    "CalibrationSet",
    "ClaimExample",
    "ExampleResult",
    "Judge",
    "JudgeCache",
    "JudgeConfig",
    "JudgeError",
    "JudgeServerError",
    "JudgeUnreachable",
    "JudgeUnavailable",
    "ModelJudge",
    "OpenAIBackend",
    "ProviderChoices",
    "ProviderConfigError",
    "RubricExample",
    "StructuredBackend",
    "StructuredRequest",
    "calibrate",
    "calibrated",
    "default_cache_dir",
    "from_env_and_flags",
    "load_calibration",
    "make_judge",
    "open_judge",
]
