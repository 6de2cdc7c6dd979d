"""llm-cpu and the real Lemonade Server side by side on the same model files, in one run.

Which server trialbox starts on the CPU by default is decided here, by what a GAIA user feels:
decode speed and first-token latency on GAIA-shaped chats (a long system prompt with tool
descriptions, a short question, a streamed answer), embedding throughput on GAIA's batches (25
chunks of ~256 tokens per request), GAIA's own index of a large document (its RAG SDK, in the
agent-ui image), resident memory, and start-up to ready. Both servers run at once on a network
of the bench's own (`trialbox.run=bench-servers-…`, removed at the end), each serving
SmolLM2-135M-Instruct Q4_1 and all-MiniLM-L6-v2 Q8_0 — the very files of .cache/models — under
GAIA's names; requests go to llm-cpu directly and to Lemonade through trialbox's front door, as
trialbox runs each (the door's own cost is ~2 ms a request: README, front door).

Rounds alternate the order (A B, B A, ...), so a drift of the machine falls on both alike, and
every ratio is B ÷ A within a round. Chats are greedy with one seed and `cache_prompt: false`
(each request prefills its prompt afresh, as a new Agent UI session does), so both servers
decode the same tokens. The bench's own checks: `--null` makes B a second llm-cpu, so every
ratio must read ~1.00; `--plant` makes B a second llm-cpu held to one of the two cores (a known
slowdown), so decode and first token must read clearly worse than the A/A's range. Two
variants of llm-cpu are measured the same way: `--cache` (B keeps an embeddings cache; GAIA then
indexes the document a second time on each side, as a scenario's agent does on its first turn
and the next scenario with the same document does again); `--passive` (B's OpenMP threads
sleep when idle, `OMP_WAIT_POLICY=PASSIVE`, as the Lemonade image's do), `--active` (B's spin
until work comes, `OMP_WAIT_POLICY=ACTIVE`), `--poll N` (B runs with llama.cpp's busy-wait level
N), `--threads N` (B runs N threads) and `--decode-threads N` (B decodes on N of them) change
B's thread settings, `--chat-flash-attn on|off` B's chat attention, `--chat-servers N` how many
llama-servers hold B's chat slots; they combine with each other. `--streams N` sends each round's
chats N at a time (each on a slot of its own, as a run's sandboxes are) and adds the tokens the
streams decoded together per second of the round's chats (`streams_tokens_per_s`).
`--load N` keeps N processes busy on the same cores while the rounds run (a container of the
bench's own, `--load-duty` of each 100 ms spent spinning), as a run's Agent UI and harness share
the cores with the server; `--label KEY=VALUE` adds a label to everything the bench starts.

    scripts/bench-servers [--rounds 5] [--chats 3] [--batches 3] [--index-chars 1000000]
                          [--null | --plant | --cache] [--passive | --active] [--poll N]
                          [--threads N] [--decode-threads N] [--chat-flash-attn on|off]
                          [--chat-servers N] [--streams N]
                          [--load N [--load-duty 1.0]] [--label KEY=VALUE]
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import httpx

from runner.stack.labels import RUN_LABEL
from runner.stack.lemonade_container import start_front_door, start_lemonade
from runner.stack.llm_container import LLM_CPU_IMAGE, LlmContainer, start_llm_container
from runner.system.paths import cache_root, eval_root

CHAT_MODEL = "Gemma-4-E4B-it-GGUF"
EMBED_MODEL = "user.embeddinggemma-300m-GGUF"
UI_IMAGE = "trialbox/agent-ui:dev"
#: GAIA's embedding batch, and chunks long enough that MiniLM cuts each to its 256 tokens.
BATCH = 25
CHUNK_CHARS = 1800
#: Tokens asked per chat answer (a short agent turn).
ANSWER_TOKENS = 64

INDEX_SCRIPT = r"""
import json, sys, time
from gaia.rag.sdk import RAGSDK, RAGConfig
rag = RAGSDK(RAGConfig(cache_dir="/tmp/rag", use_vlm=False, max_total_chunks=10**7, allowed_paths=["/doc"]))
started = time.monotonic()
result = rag.index_document(sys.argv[1])
print("RESULT " + json.dumps({"seconds": time.monotonic() - started, "chunks": result.get("num_chunks"),
                              "ok": bool(result.get("success")), "error": result.get("error")}))
"""


@dataclass
class Server:
    """One side: its container, where it answers, and what was measured of it."""

    key: str
    kind: str
    #: CPUs the container may use (None: all): the planted slowdown.
    cpus: float | None = None
    #: Added to llm-cpu's command line (`--embedding-cache-mib 512`) and its environment.
    args: list[str] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)
    url: str = ""
    container: Any = None
    ready_s: float = 0.0
    figures: dict[str, list[float]] = field(default_factory=dict)

    def add(self, metric: str, value: float) -> None:
        self.figures.setdefault(metric, []).append(value)


@functools.lru_cache(maxsize=8)
def corpus_text(chars: int) -> str:
    """Our own corpus prose (eval/corpus), repeated to `chars` characters."""
    root = eval_root() / "corpus"
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(root.rglob("*"))
             if p.suffix in {".md", ".txt"} and p.is_file()]
    text = "\n\n".join(t for t in texts if t.strip())
    return (text * (chars // max(len(text), 1) + 1))[:chars]


def chunks(count: int) -> list[str]:
    text = corpus_text(count * CHUNK_CHARS)
    return [text[i:i + CHUNK_CHARS] for i in range(0, len(text), CHUNK_CHARS)][:count]


def gaia_shaped_chat(question: str) -> dict[str, Any]:
    """A system prompt of an Agent UI turn's size (instructions, tool descriptions, a retrieved
    excerpt: ~1,500 tokens of our own text) and a short question, streamed, greedy."""
    tools = "\n".join(f"- {name}: {what}" for name, what in (
        ("query_documents", "search the indexed documents for passages that answer a question"),
        ("index_document", "add a file to the document index so it can be searched"),
        ("list_indexed_documents", "list the documents the index holds"),
        ("search_file", "find files on the user's machine by name"),
        ("read_file", "read a text file the user named")))
    excerpt = corpus_text(4500)
    system = ("You are a careful assistant on the user's own computer. Answer from the documents "
              f"and cite them. Tools you may call:\n{tools}\n\nRetrieved excerpt:\n{excerpt}")
    return {"model": CHAT_MODEL, "stream": True, "max_tokens": ANSWER_TOKENS, "temperature": 0,
            "top_k": 1, "seed": 1234, "cache_prompt": False, "stream_options": {"include_usage": True},
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}]}


def chat_once(client: httpx.Client, server: Server, question: str) -> int:
    """TTFT (first content chunk, on this clock) and decode rate (tokens after the first over
    first-to-last token time, counted by the server's usage); returns the tokens decoded."""
    body = gaia_shaped_chat(question)  # built before the clock starts: it reads the corpus
    started = time.perf_counter()
    first = last = None
    tokens = 0
    with client.stream("POST", f"{server.url}/api/v1/chat/completions", json=body) as reply:
        if reply.status_code != 200:
            raise SystemExit(f"{server.key}: chat HTTP {reply.status_code}: {reply.read()[:300]!r}")
        for line in reply.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line.removeprefix("data: "))
            if any((c.get("delta") or {}).get("content") for c in chunk.get("choices") or []):
                last = time.perf_counter()
                first = first or last
            tokens = int((chunk.get("usage") or {}).get("completion_tokens")
                         or (chunk.get("timings") or {}).get("predicted_n") or tokens)
    if first is None or last is None or tokens < 2:
        raise SystemExit(f"{server.key}: the chat streamed no answer")
    server.add("ttft_s", first - started)
    server.add("decode_tokens_per_s", (tokens - 1) / max(last - first, 1e-6))
    return tokens


def chat_streams(client: httpx.Client, server: Server, questions: list[str], streams: int) -> None:
    """`questions` asked `streams` at a time. The chats pin no slot, so each gets an idle slot of
    its own (from llama.cpp, or from trialbox_llm.slots when the slots are split over servers), as
    each of a run's sandboxes gets one. With more than one stream, the tokens decoded together per
    second of wall is added (`streams_tokens_per_s`)."""
    if streams <= 1:
        for question in questions:
            chat_once(client, server, question)
        return
    started = time.perf_counter()
    with ThreadPoolExecutor(streams) as pool:
        tokens = sum(pool.map(lambda question: chat_once(client, server, question), questions))
    server.add("streams_tokens_per_s", tokens / (time.perf_counter() - started))


def embed_batches(client: httpx.Client, server: Server, batches: list[list[str]]) -> None:
    started = time.perf_counter()
    for batch in batches:
        reply = client.post(f"{server.url}/api/v1/embeddings", json={"model": EMBED_MODEL, "input": batch})
        if reply.status_code != 200 or len(reply.json().get("data", [])) != len(batch):
            raise SystemExit(f"{server.key}: embeddings HTTP {reply.status_code}: {reply.text[:300]}")
    if batches:
        server.add("embed_chunks_per_s", sum(map(len, batches)) / (time.perf_counter() - started))


def memory_mib(server: Server) -> float:
    stats = server.container.stats(stream=False)
    return float(stats["memory_stats"].get("usage", 0)) / 2**20


def gaia_index(server: Server, network: str, doc: Path, labels: dict[str, str]) -> dict[str, Any]:
    """GAIA's own RAG SDK indexes `doc` against the server; its wall time and chunk count."""
    label_args = [arg for key, value in labels.items() for arg in ("--label", f"{key}={value}")]
    done = subprocess.run(
        ["docker", "run", "--rm", *label_args, "--network", network,
         "-v", f"{doc.parent}:/doc:ro", "-e", f"LEMONADE_BASE_URL={server.url}",
         "--entrypoint", "python", UI_IMAGE, "-c", INDEX_SCRIPT, f"/doc/{doc.name}"],
        capture_output=True, text=True, check=False)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line.removeprefix("RESULT "))
            return result
    raise SystemExit(f"GAIA's index against {server.key} failed:\n{done.stderr[-2000:]}")


LOAD_SCRIPT = r"""
import multiprocessing, sys, time
def spin(duty):
    while True:
        until = time.perf_counter() + 0.1 * duty
        while time.perf_counter() < until:
            pass
        time.sleep(0.1 * (1 - duty))
duty = float(sys.argv[2])
for _ in range(int(sys.argv[1])):
    multiprocessing.Process(target=spin, args=(duty,)).start()
"""


def start_load(processes: int, duty: float, labels: dict[str, str], tag: str,
               client: docker.DockerClient) -> Any:
    """A container of `processes` busy loops, each spinning `duty` of every 100 ms: the
    competing load a run puts on the cores beside the server. No network, removed at the end."""
    return client.containers.run(
        LLM_CPU_IMAGE, ["-c", LOAD_SCRIPT, str(processes), str(duty)], entrypoint="python",
        name=f"tbx-{tag}-load", labels=labels, network_mode="none", detach=True)


def start(server: Server, network: str, labels: dict[str, str], client: docker.DockerClient) -> None:
    tag = labels[RUN_LABEL]
    started = time.perf_counter()
    name = f"tbx-{tag}-{server.key.lower()}"
    if server.kind == "lemonade":
        # As trialbox runs it: behind the front door, which cuts GAIA's long chunks to the
        # bundled embedder's window (llm-cpu does the same itself).
        lemonade = start_lemonade(name, labels, network, client=client)
        _door, server.url = start_front_door(f"{name}-door", labels, network, lemonade.url,
                                             client=client)
        server.container = lemonade.container
    else:
        limit: dict[str, Any] = {"nano_cpus": int(server.cpus * 1e9)} if server.cpus else {}
        llm: LlmContainer = start_llm_container(name, labels, models=True, network=network,
                                                client=client, args=server.args,
                                                environment=server.environment, **limit)
        server.url, server.container = llm.url, llm.container
    server.ready_s = time.perf_counter() - started


def spread(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.3g}"
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return f"{statistics.median(values):.3g} (IQR {q1:.3g}–{q3:.3g})"


def ratios(a: list[float], b: list[float], per_round: int) -> list[float]:
    """B ÷ A of each round's medians (the rounds are the unit: they are what alternated)."""
    rounds = min(len(a), len(b)) // per_round
    return [statistics.median(b[i * per_round:(i + 1) * per_round])
            / statistics.median(a[i * per_round:(i + 1) * per_round]) for i in range(rounds)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="llm-cpu (A) and real Lemonade (B), side by side.")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chats", type=int, default=3, help="chats per server per round")
    parser.add_argument("--batches", type=int, default=3, help="embedding requests of 25 per round")
    parser.add_argument("--index-chars", type=int, default=1_000_000,
                        help="GAIA indexes a document of this many characters on each (0: skip)")
    check = parser.add_mutually_exclusive_group()
    check.add_argument("--null", action="store_true", help="B is a second llm-cpu (reads ~1.00)")
    check.add_argument("--plant", action="store_true",
                       help="B is a second llm-cpu on one CPU (must read clearly slower)")
    check.add_argument("--cache", action="store_true",
                       help="B is a second llm-cpu with the embeddings cache on; GAIA indexes "
                       "the document twice on each, as a scenario and its agent's first turn do")
    waits = parser.add_mutually_exclusive_group()
    waits.add_argument("--passive", action="store_true",
                       help="B is a second llm-cpu with OMP_WAIT_POLICY=PASSIVE")
    waits.add_argument("--active", action="store_true",
                       help="B is a second llm-cpu with OMP_WAIT_POLICY=ACTIVE")
    parser.add_argument("--poll", type=int, help="B is a second llm-cpu with --poll N")
    parser.add_argument("--threads", type=int, help="B is a second llm-cpu with --threads N")
    parser.add_argument("--decode-threads", type=int,
                        help="B is a second llm-cpu with --decode-threads N")
    parser.add_argument("--chat-flash-attn", choices=["on", "off"],
                        help="B is a second llm-cpu with the chat model's flash attention on/off")
    parser.add_argument("--chat-servers", type=int,
                        help="B is a second llm-cpu whose chat slots N llama-servers hold")
    parser.add_argument("--streams", type=int, default=1,
                        help="chats sent at once, each on a slot of its own (default 1)")
    parser.add_argument("--load", type=int, default=0,
                        help="processes kept busy beside the servers during the rounds")
    parser.add_argument("--load-duty", type=float, default=1.0,
                        help="share of each 100 ms a load process spins (default 1: all)")
    parser.add_argument("--label", action="append", default=[], metavar="KEY=VALUE",
                        help="a label on every container and the network the bench starts")
    args = parser.parse_args(argv)
    variant = args.passive or args.active or any(
        value is not None
        for value in (args.poll, args.threads, args.decode_threads, args.chat_flash_attn,
                      args.chat_servers))
    if variant and (args.null or args.plant):
        parser.error("--null and --plant compare llm-cpu with itself: no B variant with them")
    if args.streams < 1:
        parser.error("--streams is how many chats run at once: at least 1")
    if not 0 < args.load_duty <= 1:
        parser.error("--load-duty is a share of the time: above 0, at most 1")

    tag = f"bench-servers-{int(time.time())}"
    labels = {**dict(item.partition("=")[::2] for item in args.label), RUN_LABEL: tag}
    client = docker.from_env()
    a = Server("A", "llm-cpu")
    second = args.null or args.plant or args.cache or variant
    b_args = ["--embedding-cache-mib", "512"] if args.cache else []
    b_args += ["--poll", str(args.poll)] if args.poll is not None else []
    b_args += ["--threads", str(args.threads)] if args.threads is not None else []
    b_args += (["--decode-threads", str(args.decode_threads)]
               if args.decode_threads is not None else [])
    b_args += ["--chat-flash-attn", args.chat_flash_attn] if args.chat_flash_attn else []
    b_args += ["--chat-servers", str(args.chat_servers)] if args.chat_servers else []
    wait_policy = "PASSIVE" if args.passive else "ACTIVE" if args.active else None
    b = Server("B", "llm-cpu" if second else "lemonade", cpus=1.0 if args.plant else None,
               args=b_args, environment={"OMP_WAIT_POLICY": wait_policy} if wait_policy else {})
    questions = ["What is the travel budget?", "Who owns the contract?", "Summarise the audit.",
                 "When is the launch?", "List the open actions."]
    network = client.networks.create(f"tbx-{tag}", labels=labels)
    network_name = str(network.name)
    try:
        for server in (a, b):
            start(server, network_name, labels, client)
        if args.load:
            start_load(args.load, args.load_duty, labels, tag, client)
        with httpx.Client(timeout=300) as http:
            for server in (a, b):  # warm-up, not counted
                chat_once(http, server, questions[0])
                embed_batches(http, server, [chunks(BATCH)] if args.batches else [])
                server.figures.clear()
            pieces = chunks(BATCH * args.batches)
            batches = [pieces[i:i + BATCH] for i in range(0, len(pieces), BATCH)]
            for round_no in range(args.rounds):
                for server in (a, b) if round_no % 2 == 0 else (b, a):
                    chat_streams(http, server, [questions[(round_no + i) % len(questions)]
                                                for i in range(args.chats)], args.streams)
                    embed_batches(http, server, batches)
                    server.add("memory_mib", memory_mib(server))
                print(f"round {round_no + 1}/{args.rounds} done", flush=True)
        index: dict[str, dict[str, Any]] = {}
        if args.index_chars:
            folder = cache_root() / "bench-servers"
            folder.mkdir(parents=True, exist_ok=True)
            doc = folder / "register.md"
            doc.write_text(corpus_text(args.index_chars), encoding="utf-8")
            for server in (a, b):
                index[server.key] = gaia_index(server, network_name, doc, labels)
            if args.cache:  # the same document again: what the cache is for
                for server in (a, b):
                    index[f"{server.key} again"] = gaia_index(server, network_name, doc, labels)
        limited = (f" on {b.cpus:g} CPU" if b.cpus else "") + "".join(
            f" {arg}" for arg in b.args) + "".join(f" {k}={v}" for k, v in b.environment.items())
        loaded = (f"; {args.load} process(es) busy {args.load_duty:.0%} of the time beside them"
                  if args.load else "; no added load")
        print(f"\nA = llm-cpu, B = {b.kind}{limited}; {args.rounds} alternated rounds; same model "
              f"files{loaded}\n")
        print(f"{'figure':<26} {'A':<28} {'B':<28} B ÷ A per round (median, min–max)")
        per_round = {"ttft_s": args.chats, "decode_tokens_per_s": args.chats,
                     "streams_tokens_per_s": 1, "embed_chunks_per_s": 1, "memory_mib": 1}
        for metric, n in per_round.items():
            if metric not in a.figures or metric not in b.figures:
                continue
            r = ratios(a.figures[metric], b.figures[metric], n)
            print(f"{metric:<26} {spread(a.figures[metric]):<28} {spread(b.figures[metric]):<28} "
                  f"{statistics.median(r):.2f} ({min(r):.2f}–{max(r):.2f})")
        print(f"{'start-up to ready (s)':<26} {a.ready_s:<28.1f} {b.ready_s:<28.1f} {b.ready_s / a.ready_s:.2f}")
        for key, result in index.items():
            failed = "" if result["ok"] else f" — failed: {result.get('error')}"
            print(f"GAIA index of {args.index_chars:,} characters on {key}: {result['seconds']:.1f} s, "
                  f"{result['chunks']} chunks, ok={result['ok']}{failed}")
        for again in ("", " again"):
            if f"A{again}" in index and f"B{again}" in index:
                ratio = index[f"B{again}"]["seconds"] / index[f"A{again}"]["seconds"]
                print(f"GAIA index{again} B ÷ A: {ratio:.2f} (one pair, A then B)")
        print("load average:", " ".join(Path("/proc/loadavg").read_text().split()[:3]))
    finally:
        for container in client.containers.list(all=True, filters={"label": f"{RUN_LABEL}={tag}"}):
            container.remove(force=True)
        network.remove()
        client.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
