"""Per-request metering at the LLM's front door: who asked, how long it waited, how fast it came.

Why: Lemonade's `/stats` (and so GAIA's `turn_metrics`) describe the *last* completion of
*anyone*. With several sandboxes on one server a turn would carry another sandbox's figures,
and a turn of several model calls only its last one. So every inference request passing the
front door (llm-cpu's own routes, or `front_door` in front of a real Lemonade Server) is
recorded here with the client that sent it, and the runner reads a sandbox's own records back.

Attribution: by the client's source address. Every sandbox has its own network on which the
front door is the only other endpoint, so the Agent UI's address on that network names the
sandbox; nothing in the request (which the agent under test controls) is trusted for it.

Timings are taken by the front door itself: `queue_wait_s` from the request's arrival until it
is sent on to the model (gate of a restart, model start), `time_to_first_token_s` from arrival
until the first streamed chunk carrying generated text or a tool call, decode rate as the
completion tokens after the first over the time from the first to the last token. The server's own `timings` sit beside them as
`self_reported`. A non-streamed answer has no first token the front door can see: its TTFT and
decode rate stay None (never a guess) and the self-reported figures are all there is.

Reading the records (`GET /trialbox/meter`): a client may read its own records without a
token; reading another client's (the runner asking for a sandbox's) needs the admin token, so
one sandbox cannot watch another's traffic. A server started without a token (tests, a bare
`python -m trialbox_llm`) has no admin to tell apart and lets anyone read: the records hold
timings and token counts, never content, and `trialbox up` always starts one with a token.
"""

from __future__ import annotations

import json
import re
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field
from starlette.requests import Request
from starlette.responses import JSONResponse

from trialbox_llm.admin import AdminGuard
from trialbox_llm.schemas import Stats
from trialbox_llm.stats import merge, stats_from_response

#: Records kept (oldest dropped first): hours of a busy run; a record is ~300 bytes.
MAX_RECORDS = 50_000
METER_PATH = "/trialbox/meter"


class MeterRecord(BaseModel):
    """One request through the front door, as the front door measured it."""

    seq: int = Field(description="1-based sequence number of this record on this front door")
    client: str = Field(description="the client's source address (names the sandbox)")
    route: str = Field(description="request path, e.g. /api/v1/chat/completions")
    model: str | None = Field(default=None, description="the model the request named")
    streamed: bool = Field(description="whether the answer was streamed (SSE)")
    started_at: float = Field(description="arrival at the front door, Unix time in seconds")
    queue_wait_s: float = Field(
        description="seconds from arrival until the request was sent on to the model")
    time_to_first_token_s: float | None = Field(
        default=None,
        description="seconds from arrival to the first streamed chunk with generated text or a "
        "tool call, as the front door saw it; None for a non-streamed answer")
    decode_tokens_per_s: float | None = Field(
        default=None,
        description="completion tokens / seconds after the first token (front door's clock)")
    decode_s: float | None = Field(
        default=None,
        description="seconds from the first to the last streamed token (the decode rate's time)")
    prompt_tokens: int | None = Field(default=None, description="prompt tokens (server usage)")
    completion_tokens: int | None = Field(
        default=None, description="generated tokens (server usage)")
    wall_s: float = Field(description="seconds from arrival to the answer's last byte")
    status: int = Field(description="HTTP status answered to the client")
    decoding: str | None = Field(
        default=None,
        description="`repeatable` when the front door forced greedy decoding and a fixed seed on "
        "this request (`decoding`), None when it passed the client's sampling settings as sent")
    inputs: int | None = Field(
        default=None,
        description="how many inputs an embeddings (`input`) or reranking (`documents`) request "
        "carried — while a document is indexed, its chunks embedded so far; None for others")
    cached_inputs: int | None = Field(
        default=None,
        description="how many of an embeddings request's `inputs` the server's embeddings cache "
        "answered without the model (`--embedding-cache-mib`); None when no cache is on")
    slot: int | None = Field(
        default=None,
        description="the llama.cpp slot a chat request that pinned one (`id_slot`; GAIA pins "
        "slot 0) was sent to: the one it asked for, or an idle one when another client's answer "
        "held it (`slots`); None when it pinned none")
    upstream: str | None = Field(
        default=None,
        description="which server behind the front door answered (`trialbox ab`'s side, A or "
        "B); None when the door has one server only")
    self_reported: Stats | None = Field(
        default=None,
        description="the server's own figures for this request (llama.cpp `timings`), "
        "self-reported and not measured by the front door")


class MeterReport(BaseModel):
    """`GET /trialbox/meter`: one client's records since a point in time."""

    client: str = Field(description="the client whose records these are")
    since: float = Field(description="only records that arrived at or after this Unix time")
    records: list[MeterRecord] = Field(description="the records, oldest first")


def client_of(request: Request) -> str:
    """The source address the request came from (the sandbox's, on its own network)."""
    return request.client.host if request.client else "unknown"


async def meter_route(request: Request) -> JSONResponse:
    """`GET /trialbox/meter?client=ADDR&since=UNIX`: a client's records (see module doc)."""
    meter: Meter = request.app.state.meter
    guard: AdminGuard = request.app.state.meter_guard
    asker = client_of(request)
    client = request.query_params.get("client") or asker
    try:
        since = float(request.query_params.get("since") or 0.0)
    except ValueError:
        return JSONResponse({"error": {"message": "since must be a Unix time in seconds",
                                       "type": "invalid_request_error"}}, 400)
    if (client != asker and guard.configured
            and not guard.is_admin(request.headers.get("authorization"))):
        return JSONResponse({"error": {
            "message": "reading another client's requests needs the admin token "
            "(`Authorization: Bearer <token>`); a client may read its own without one",
            "type": "forbidden", "code": "admin_token_required"}}, 403)
    report = MeterReport(client=client, since=since, records=meter.of(client, since))
    return JSONResponse(report.model_dump())


@dataclass
class Meter:
    """The front door's record of every inference request, bounded in memory."""

    records: deque[MeterRecord] = field(default_factory=lambda: deque(maxlen=MAX_RECORDS))
    _seq: int = 0

    def add(self, **fields: Any) -> MeterRecord:
        self._seq += 1
        record = MeterRecord(seq=self._seq, **fields)
        self.records.append(record)
        return record

    def of(self, client: str, since: float = 0.0) -> list[MeterRecord]:
        return [r for r in self.records if r.client == client and r.started_at >= since]


#: A streamed chunk past the first token that carries output: text (`"content"`), or a delta
#: still open (`"finish_reason": null`: reasoning text, a tool call's next piece).
_TOKEN_MARKS = re.compile(rb'"content"|"finish_reason"\s*:\s*null')


def _has_output(chunk: dict[str, Any]) -> bool:
    """Whether a stream chunk carries generated text, reasoning or a tool call."""
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if isinstance(delta, dict) and any(
            delta.get(key) for key in ("content", "reasoning_content", "tool_calls")
        ):
            return True
    return False


class Timing:
    """One request's clock: started on arrival, fed the stream's lines, closed into a record."""

    def __init__(self, meter: Meter, client: str, route: str, model: str | None,
                 streamed: bool) -> None:
        self.meter, self.client, self.route, self.model = meter, client, route, model
        self.streamed = streamed
        self.arrived_wall = time.time()
        self.arrived = time.perf_counter()
        self.sent: float | None = None
        self.first_token: float | None = None
        self.last_token: float | None = None
        self.stats: Stats | None = None
        self.usage: dict[str, Any] = {}
        self.closed = False
        #: A whole non-streamed answer, parsed when the record is written (off the answer's path).
        self.answer: bytes | None = None
        #: Set when the front door forced this request's decoding (`decoding.REPEATABLE`).
        self.decoding: str | None = None
        #: The server that answered, when the door switches between two (`trialbox ab`).
        self.upstream: str | None = None
        #: The llama.cpp slot a pinned chat was sent to (`slots`).
        self.slot: int | None = None
        #: An embeddings or reranking request's inputs (`inputs_of`); None for the others.
        self.inputs: int | None = None
        #: How many of those the embeddings cache answered (None: no cache on this server).
        self.cached_inputs: int | None = None
        self._pending = b""

    def sending(self) -> None:
        """The request leaves for the model now (the end of its queue wait)."""
        if self.sent is None:
            self.sent = time.perf_counter()

    def chunk(self, data: bytes) -> None:
        """Bytes of the streamed answer as they came, cut anywhere (lines are put together here).

        The hot path of a stream: once the first token is out, a chunk of whole lines that
        carries neither `usage` nor `timings` is a chunk of text; only its arrival matters, so
        it is neither split, decoded nor parsed (a few substring tests per chunk)."""
        now = time.perf_counter()
        if (self.first_token is not None and not self._pending and data.endswith(b"\n")
                and b'"usage"' not in data and b'"timings"' not in data):
            if _TOKEN_MARKS.search(data):
                self.last_token = now
            return
        lines, self._pending = split_lines(self._pending, data)
        for line in lines:
            self.line(line, now)

    def line(self, line: str, at: float | None = None) -> None:
        """One line of the streamed answer; `at` is when its bytes came (default: now)."""
        if not line.startswith("data:"):
            return
        payload = line[5:].strip()
        if not payload or payload == "[DONE]":
            return
        now = time.perf_counter() if at is None else at
        if self.first_token is not None and '"usage"' not in payload and '"timings"' not in payload:
            # Past the first token only the clock matters (a chunk of text), so the line is not
            # parsed: the front door's cost per streamed token stays a substring test.
            if _TOKEN_MARKS.search(payload.encode()):
                self.last_token = now
            return
        try:
            chunk = json.loads(payload)
        except json.JSONDecodeError:
            return
        if not isinstance(chunk, dict):
            return
        if _has_output(chunk):
            self.last_token = now
            if self.first_token is None:
                self.first_token = self.last_token
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        self.stats = merge(self.stats, stats_from_response(chunk))

    def body(self, content: bytes) -> None:
        """A whole (non-streamed) answer."""
        try:
            parsed = json.loads(content)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return
        if isinstance(parsed, dict):
            self.stats = stats_from_response(parsed)
            if isinstance(parsed.get("usage"), dict):
                self.usage = parsed["usage"]

    def close(self, status: int) -> MeterRecord | None:
        """Write the record (once); later calls do nothing."""
        if self.closed:
            return None
        self.closed = True
        end = time.perf_counter()
        if self.answer is not None:
            self.body(self.answer)
        sent = self.sent if self.sent is not None else end
        completion = _count(self.usage.get("completion_tokens"))
        prompt = _count(self.usage.get("prompt_tokens"))
        if self.stats is not None:
            completion = completion if completion is not None else self.stats.output_tokens
            prompt = prompt if prompt is not None else self.stats.input_tokens
        ttft = decode = after = None
        if self.first_token is not None:
            ttft = self.first_token - self.arrived
            after = (self.last_token or end) - self.first_token
            # The first token is already out when the clock starts: the rest came after it.
            if completion and completion > 1 and after > 0:
                decode = (completion - 1) / after
        return self.meter.add(
            client=self.client, route=self.route, model=self.model, streamed=self.streamed,
            started_at=self.arrived_wall, queue_wait_s=round(sent - self.arrived, 6),
            time_to_first_token_s=None if ttft is None else round(ttft, 6),
            decode_tokens_per_s=None if decode is None else round(decode, 3),
            decode_s=None if after is None else round(after, 6),
            prompt_tokens=prompt, completion_tokens=completion,
            wall_s=round(end - self.arrived, 6), status=status, self_reported=self.stats,
            decoding=self.decoding, upstream=self.upstream, slot=self.slot, inputs=self.inputs,
            cached_inputs=self.cached_inputs,
        )


def inputs_of(route: str, body: Any) -> int | None:
    """How many inputs an embeddings (`input`: one text or a list) or reranking (`documents`)
    request carries; None for any other request, or a body that says no number."""
    if not isinstance(body, dict):
        return None
    path = route.rstrip("/")
    key = "input" if path.endswith("embeddings") else "documents" if path.endswith("reranking") else None
    value = body.get(key) if key else None
    if isinstance(value, str):
        return 1
    return len(value) if isinstance(value, list) else None


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value)


def split_lines(pending: bytes, chunk: bytes) -> tuple[list[str], bytes]:
    """Complete lines of `pending + chunk`, and the incomplete rest."""
    *lines, rest = (pending + chunk).split(b"\n")
    return [line.decode("utf-8", "replace").rstrip("\r") for line in lines], rest
