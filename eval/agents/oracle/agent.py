# Oracle -- a GAIA agent that knows the answers: `trialbox selftest --live` proves with it that
# a scenario can be passed through the real sandbox, Agent UI, MCP bridge and tools.
#
# It asks no model. For each user message it finds its turn in plan.json (written beside this
# file by the self-test, only for that run: the ground truth never reaches a normal run's
# sandbox), makes the tool calls the plan lists through GAIA's own tool path (the same
# console events a model-driven turn emits, so the Agent UI records them the same way), and
# answers with the plan's text -- but only when its tools brought that text back: the plan's
# needles (the answer as its document writes it, found there before the run) must stand in what
# the tools returned, after one search of the indexed chunks for any missing; otherwise the
# answer says the scenario is not answerable from the corpus, and a tool that fails is named as
# the answer, so a broken retrieval can never pass. The adversary is this file under another
# id, with a plan of wrong answers.

import json
import os
from pathlib import Path

from gaia.agents.base.agent import Agent
from gaia.agents.tools.file_tools import FileSearchToolsMixin
from gaia.agents.tools.rag_tools import RAGToolsMixin
from gaia.llm.lemonade_client import DEFAULT_MODEL_NAME
from gaia.rag.sdk import RAGSDK, RAGConfig
from gaia.security import PathValidator

PLAN = Path(__file__).with_name("plan.json")


def _key(text):
    return " ".join(str(text or "").split()).casefold()


class OracleAgent(Agent, RAGToolsMixin, FileSearchToolsMixin):
    """Answers from plan.json after calling the tools it lists (GAIA's RAG and file-search
    tools, as the reference agent has them)."""

    AGENT_ID = "oracle"
    AGENT_NAME = "Oracle (trialbox self-test)"
    AGENT_DESCRIPTION = "Answers from the scenario's ground truth; for trialbox selftest --live."
    CONVERSATION_STARTERS = ("What does the attached document say?",)

    def __init__(self, *, model_id=None, base_url=None, streaming=False, silent_mode=True,
                 debug=False, device=None, min_context_size=None, max_steps=None,
                 rag_documents=None, library_documents=None, allowed_paths=None,
                 ui_session_id=None):
        model_id = model_id or DEFAULT_MODEL_NAME
        paths = list(allowed_paths or []) or None
        self.ui_session_id = ui_session_id
        self.library_documents = list(library_documents or [])
        self.session_documents = list(rag_documents or [])
        self.path_validator = PathValidator(allowed_paths=paths)
        self.rag = RAGSDK(
            RAGConfig(model=model_id, base_url=base_url, max_chunks=3, allowed_paths=paths),
            path_validator=self.path_validator,
        )
        self.indexed_files = set()
        self.max_chunks = 3
        self.current_session = None
        self.session_manager = None
        self.watch_directories = []
        super().__init__(model_id=model_id, base_url=base_url, streaming=streaming,
                         silent_mode=silent_mode, debug=debug, device=device,
                         min_context_size=min_context_size, max_steps=max_steps)
        for path in self.session_documents:
            result = self.rag.index_document(path)
            if isinstance(result, dict) and not result.get("error"):
                self.indexed_files.add(path)
        plan = json.loads(PLAN.read_text(encoding="utf-8")) if PLAN.is_file() else {}
        self.plan = {}
        for turn in plan.get("turns", []):
            self.plan.setdefault(_key(turn["user_message"]), []).append(turn)

    def _get_system_prompt(self):
        return "You answer from a plan; no model is asked."

    def _register_tools(self):
        self.register_rag_tools()
        self.register_file_search_tools()

    def _generate_search_keys(self, query):
        return [query.strip()] if query.strip() else []

    def _where(self, path, found=()):
        """A plan's path as this sandbox has it: a staged fixture (``~/gaia-eval/...``) in this
        user's home; a session document by file name; a file an earlier call of this turn
        found (a search's result) by file name, else by a name that holds it (a check's
        pattern such as "iso9001"); else as written. No path at all: the last file found."""
        if path is None:
            return found[-1] if found else None
        if str(path).startswith("~/"):
            return os.path.expanduser(str(path))
        name = os.path.basename(str(path)).casefold()
        known = [str(p) for p in self.session_documents + self.library_documents]
        for candidates in (known, found):
            for candidate in candidates:
                if os.path.basename(candidate).casefold() == name:
                    return candidate
        return next((f for f in found if name and name in os.path.basename(f).casefold()), path)

    def _call(self, name, arguments):
        """One tool call through GAIA's tool path, announced as a model-driven turn's are."""
        self.console.print_tool_usage(name)
        self.console.pretty_print_json(arguments, "Arguments")
        try:
            result = self._execute_tool(name, arguments)
        except Exception as exc:  # the call is the evidence; its failure is its result
            result = {"status": "error", "error": str(exc)}
        self.console.pretty_print_json(
            result if isinstance(result, dict) else {"result": str(result)}, "Result")
        self.console.print_tool_complete()
        return result

    def process_query(self, user_input, max_steps=None, trace=False, filename=None):
        # Two scenarios may send the same message: the one with this session's documents wins.
        names = {os.path.basename(str(p)) for p in self.session_documents + self.library_documents}
        candidates = self.plan.get(_key(user_input), [])
        turn = next((t for t in candidates if set(t["documents"]) <= names and t["documents"]),
                    candidates[0] if candidates else None)
        if turn is None:
            return {"result": "The self-test plan has no turn for this message.",
                    "status": "success", "steps_taken": 0}
        retrieved, failed, found = [], [], []
        for call in turn.get("calls", []):
            name, arguments = call["name"], dict(call.get("arguments", {}))
            for key in ("file_path", "path"):
                if key in arguments or (key == "file_path" and name in NEEDS_A_FILE):
                    arguments[key] = self._where(arguments.get(key), found)
            result = self._call(name, arguments)
            error = _error_of(result)
            if error is not None:
                failed.append(f"{name}: {error}")
                continue
            texts = _returned(result, arguments)
            retrieved.extend(texts)
            found.extend(t for t in texts if len(t) < 4096 and os.path.isfile(t))
        answer = turn["answer"]
        needles = turn.get("needles") or []
        if failed:
            # A tool error is a failure of the scenario, never a step the oracle talks past.
            return self._said(f"{TOOL_FAILED} {'; '.join(failed)}"[:2000], turn)
        missing = _missing(needles, retrieved)
        if missing and turn.get("may_search", True):
            # What the user's question did not bring back may still be in the index as GAIA
            # chunked it: one search of the indexed chunks for each missing needle.
            for needle in missing:
                arguments = {"pattern": needle}
                result = self._call(SEARCH_TOOL, arguments)
                if _error_of(result) is None:
                    retrieved.extend(_returned(result, arguments))
            missing = _missing(needles, retrieved)
        if missing:
            # Said, never quoted (no value): an answer that wrote the missing value would pass
            # the very check that value decides.
            what = "the answer" if len(needles) == 1 else "all of the answer"
            answer = f"{NOT_ANSWERABLE} the text its tools returned does not hold {what}"
        return self._said(answer, turn)

    def _said(self, answer, turn):
        return {"result": answer, "status": "success", "steps_taken": len(turn.get("calls", []))}


#: How the oracle's answer says why it has none: `trialbox selftest --live` reads them back.
NOT_ANSWERABLE = "Not answerable from the corpus:"
TOOL_FAILED = "A tool failed:"
#: Tools that take a file: one the plan leaves open is the file an earlier call found.
NEEDS_A_FILE = ("index_document", "query_specific_file", "analyze_data_file")
#: GAIA's search of the session's indexed chunks (runner/selftest/_live.py SEARCH_TOOL).
SEARCH_TOOL = "search_indexed_chunks"


def _error_of(result):
    """Why a tool's result is a failure (GAIA's tools answer {"status": "error", ...}), or None."""
    if isinstance(result, dict) and (result.get("status") == "error" or result.get("success") is False):
        return str(result.get("error") or result.get("message") or "failed")[:300]
    return None


def _texts(value):
    """Every string in a tool's result (chunks, file contents, names), wherever it sits."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _texts(item)]
    if isinstance(value, (list, tuple)):
        return [text for item in value for text in _texts(item)]
    return []


#: Where GAIA's tools say back what they were asked ("Found 1 matches for '17'", the query):
#: not the documents' text, so never where a needle is found.
ECHOES = frozenset({"pattern", "query", "message", "instruction", "hint", "tool", "operation",
                    "file_pattern", "search_keys"})


def _returned(result, arguments):
    """The text a tool brought back, without its echo of the call: the fields above, and any
    string that is one of the call's own arguments."""
    asked = {str(value) for value in arguments.values()}
    if isinstance(result, dict):
        result = {key: value for key, value in result.items() if key not in ECHOES}
    return [text for text in _texts(result) if text not in asked]


def _normal(text):
    """runner/selftest/_needles.py's `normal`: case, white space and curly apostrophes aside."""
    return " ".join(str(text).replace("\u2019", "'").split()).casefold()


def _missing(needles, retrieved):
    """The needles (the answer as its documents write it, from the plan) that the retrieved
    texts do not hold."""
    text = _normal("\n".join(retrieved))
    return [needle for needle in needles if _normal(needle) not in text]
