"""`python -m trialbox_llm --host 0.0.0.0 --port 13305 --models-dir DIR [--threads N] [--decode-threads N] [--poll 0-100]
[--chat-ctx TOKENS] [--drain-timeout SECONDS] [--double] [--embedder-slots N] [--embedding-cache-mib MIB]
[--chat-flash-attn on|off|auto] [--chat-servers N] [--embedder-flash-attn on|off|auto]
[--embedder-weights f16|q8_0]`; five settings may come from the environment (`TRIALBOX_LLM_CHAT_CTX`,
`TRIALBOX_LLM_DRAIN_TIMEOUT`, `TRIALBOX_LLM_DECODE_THREADS`, `TRIALBOX_LLM_CHAT_FLASH_ATTN`,
`TRIALBOX_LLM_CHAT_SERVERS`), flags win. The admin token
comes only from the environment (`TRIALBOX_LLM_ADMIN_TOKEN`): a flag would show it in `ps`."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

from trialbox_llm.admin import AdminTokenError, token_from_environment
from trialbox_llm.backend import BackendError
from trialbox_llm.catalog import SMOLLM2
from trialbox_llm.embedder_settings import EmbedderSettings, EmbedderWeights
from trialbox_llm.embedding_cache import add_cache_option
from trialbox_llm.embedding_cache import cache_mib as embedding_cache_mib
from trialbox_llm.routes import DEFAULT_DRAIN_TIMEOUT_S
from trialbox_llm.server import ServeOptions, serve


def default_threads() -> int:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, cpus or 1)


def default_decode_threads(threads: int) -> int:
    """One core left to the rest of a run (issue 35). llama.cpp's decode threads meet at a
    barrier after every step, so beside a busy process two threads on 2 cores wait for the one
    it preempts: there one decode thread decoded GAIA-shaped chats 1.25x as fast as two (two
    read 0.80, 0.75-0.85, of one) with the same first token; on a machine without added load
    two read 1.18 (0.94-1.37). Prompts keep every thread: one would make the first token
    1.56x later. `scripts/bench-servers --decode-threads 2 [--load 1]`; README, "llm-cpu's
    threads"."""
    return max(1, threads - 1)


def parse_args(argv: list[str] | None) -> ServeOptions:
    parser = argparse.ArgumentParser(
        prog="python -m trialbox_llm",
        description="Lemonade-compatible LLM server on llama.cpp (CPU): chat + embeddings.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=13305)
    parser.add_argument("--models-dir", type=Path, default=Path(".cache/models"))
    parser.add_argument(
        "--threads",
        type=int,
        default=default_threads(),
        help="threads for prompt processing (default %(default)s: every CPU this process may use)",
    )
    parser.add_argument(
        "--decode-threads",
        type=above_zero("threads"),
        default=os.environ.get("TRIALBOX_LLM_DECODE_THREADS") or None,
        help="threads decoding one token at a time (default: one fewer than --threads, at least "
        "1: a run's Agent UI and harness share the cores, and a decode thread they preempt "
        "holds up the others at every step; env TRIALBOX_LLM_DECODE_THREADS)",
    )
    parser.add_argument(
        "--poll",
        type=poll_level,
        default=None,
        help="llama.cpp's busy-wait level for its worker threads, 0 (sleep at once) to 100 "
        "(default: llama.cpp's own, 50)",
    )
    parser.add_argument(
        "--llama-verbosity", type=int, default=1, help="llama.cpp log verbosity (3 = everything)"
    )
    parser.add_argument(
        "--chat-ctx",
        type=above_zero("tokens"),
        default=os.environ.get("TRIALBOX_LLM_CHAT_CTX", SMOLLM2.default_ctx_size),
        help="chat model window in tokens (default %(default)s: GAIA 0.25.1's requirement, "
        "so it never reloads the shared model; env TRIALBOX_LLM_CHAT_CTX)",
    )
    parser.add_argument(
        "--chat-flash-attn",
        type=flash_attn_choice,
        default=os.environ.get("TRIALBOX_LLM_CHAT_FLASH_ATTN") or "auto",
        help="llama.cpp flash attention for the chat model: on, off or auto (default "
        "%(default)s: llama.cpp decides, which is on for the CPU; env TRIALBOX_LLM_CHAT_FLASH_ATTN)",
    )
    parser.add_argument(
        "--chat-servers",
        type=above_zero("llama-servers"),
        default=os.environ.get("TRIALBOX_LLM_CHAT_SERVERS") or "1",
        help="llama-servers the chat model's slots are split over, each decoding at once on "
        "its share of the decode threads (default %(default)s: one server batches every slot's "
        "tokens, which on 2 cores beside a run's sandboxes was faster; README, GAIA's public "
        "tree; env TRIALBOX_LLM_CHAT_SERVERS)",
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=os.environ.get("TRIALBOX_LLM_DRAIN_TIMEOUT", DEFAULT_DRAIN_TIMEOUT_S),
        help="seconds a restart waits for requests in flight before answering 409 "
        "(default %(default)s; env TRIALBOX_LLM_DRAIN_TIMEOUT)",
    )
    parser.add_argument(
        "--max-output-tokens",
        type=int,
        default=int(os.environ.get("TRIALBOX_LLM_MAX_OUTPUT_TOKENS", DEFAULT_MAX_OUTPUT_TOKENS)),
        help="cap on tokens generated per chat completion, reported in /health; 0 = no cap "
        "(default %(default)s: SmolLM2-135M rarely stops by itself; env TRIALBOX_LLM_MAX_OUTPUT_TOKENS)",
    )
    parser.add_argument(
        "--double",
        action="store_true",
        help="no model: answer at once with fixed text (a benchmark double that /health names "
        "trialbox-llm-double; see trialbox_llm/double.py)",
    )
    defaults = EmbedderSettings()
    parser.add_argument(
        "--embedder-slots",
        type=slot_count,
        default=defaults.slots,
        help="embedding inputs llama.cpp encodes in one decode (default %(default)s; 1 = one "
        "input at a time, as before issue 23)",
    )
    parser.add_argument(
        "--embedder-flash-attn",
        choices=sorted(_FLASH_ATTN_CHOICES),
        default=_flash_attn_name(defaults.flash_attn),
        help="llama.cpp flash attention for the embedder (default %(default)s)",
    )
    parser.add_argument(
        "--embedder-weights",
        choices=[w.value for w in EmbedderWeights],
        default=defaults.weights.value,
        help="MiniLM weights file: q8_0 (within cosine 0.999 of f16, faster) or f16 "
        "(default %(default)s)",
    )
    add_cache_option(parser)
    args = parser.parse_args(argv)
    cache_mib = embedding_cache_mib(parser, args.embedding_cache_mib)
    if cache_mib and args.embedder_slots > 1:
        # Packed inputs move each other's vectors by ~1e-4 (test_embedding_equivalence): a kept
        # vector would not be the one the model gives the same text in another batch.
        parser.error("--embedding-cache-mib needs --embedder-slots 1: with inputs packed into "
                     "one decode a vector depends on its batch, and a kept one would not be exact")
    embedder = EmbedderSettings(
        slots=args.embedder_slots,
        flash_attn=_FLASH_ATTN_CHOICES[args.embedder_flash_attn],
        weights=EmbedderWeights(args.embedder_weights),
    )
    try:
        admin_token = token_from_environment(os.environ)
    except AdminTokenError as exc:
        parser.error(str(exc))  # exits 2 with the message
    return ServeOptions(
        args.host,
        args.port,
        args.models_dir,
        args.threads,
        args.llama_verbosity,
        chat_ctx=args.chat_ctx,
        drain_timeout_s=args.drain_timeout,
        max_output_tokens=args.max_output_tokens or None,
        admin_token=admin_token,
        double=args.double,
        embedder=embedder,
        embedding_cache_mib=cache_mib,
        poll=args.poll,
        decode_threads=args.decode_threads or default_decode_threads(args.threads),
        chat_flash_attn=_FLASH_ATTN_CHOICES[args.chat_flash_attn],
        chat_servers=args.chat_servers,
    )


DEFAULT_MAX_OUTPUT_TOKENS = 512

_FLASH_ATTN_CHOICES: dict[str, bool | None] = {"on": True, "off": False, "auto": None}


def _flash_attn_name(value: bool | None) -> str:
    return next(name for name, setting in _FLASH_ATTN_CHOICES.items() if setting is value)


def flash_attn_choice(text: str) -> str:
    """argparse type: on, off or auto, or one clear error that also names the variable (an
    unknown value may come from the environment instead of the command line)."""
    if text not in _FLASH_ATTN_CHOICES:
        raise argparse.ArgumentTypeError(
            f"expected on, off or auto (the flag or TRIALBOX_LLM_CHAT_FLASH_ATTN), got {text!r}"
        )
    return text


def slot_count(text: str) -> int:
    """argparse type: a slot count llama.cpp accepts (1 to 64), or one clear error."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 64:
        raise argparse.ArgumentTypeError(f"expected a slot count from 1 to 64, got {text!r}")
    return value


def poll_level(text: str) -> int:
    """argparse type: a busy-wait level llama.cpp accepts (0 to 100), or one clear error."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"expected a poll level from 0 to 100, got {text!r}")
    return value


def above_zero(what: str) -> Callable[[str], int]:
    """argparse type: a whole number of `what` above zero, or one clear error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value <= 0:
            raise argparse.ArgumentTypeError(f"expected a number of {what} above 0, got {text!r}")
        return value

    return parse


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per proxied call is noise
    options = parse_args(argv)
    try:
        serve(options)
    except BackendError as exc:
        print(f"llm_server: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
