# Oracle -- a GAIA agent that knows the answers: `trialbox selftest --live` proves with it that
# a scenario can be passed through the real sandbox, Agent UI, MCP bridge and tools.
#
# It asks no model. For each user message it finds its turn in plan.json (written beside this
# file by the self-test, only for that run: the ground truth never reaches a normal run's
# sandbox), makes the tool calls the plan lists through GAIA's own tool path (the same
# console events a model-driven turn emits, so the Agent UI records them the same way), and
# answers with the plan's text. The adversary is this file under another id, with a plan of
# wrong answers.

import json
import os
from pathlib import Path

from gaia.agents.base.agent import Agent
from gaia.agents.tools.rag_tools import RAGToolsMixin
from gaia.llm.lemonade_client import DEFAULT_MODEL_NAME
from gaia.rag.sdk import RAGSDK, RAGConfig
from gaia.security import PathValidator

PLAN = Path(__file__).with_name("plan.json")


def _key(text):
    return " ".join(str(text or "").split()).casefold()


class OracleAgent(Agent, RAGToolsMixin):
    """Answers from plan.json after calling the tools it lists."""

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

    def _generate_search_keys(self, query):
        return [query.strip()] if query.strip() else []

    def _where(self, path):
        """A plan's corpus-relative path as this sandbox has it (by file name among the
        session's documents), else as written."""
        name = os.path.basename(str(path))
        for known in self.session_documents + self.library_documents:
            if os.path.basename(str(known)) == name:
                return str(known)
        return path

    def process_query(self, user_input, max_steps=None, trace=False, filename=None):
        # Two scenarios may send the same message: the one with this session's documents wins.
        names = {os.path.basename(str(p)) for p in self.session_documents + self.library_documents}
        candidates = self.plan.get(_key(user_input), [])
        turn = next((t for t in candidates if set(t["documents"]) <= names and t["documents"]),
                    candidates[0] if candidates else None)
        if turn is None:
            return {"result": "The self-test plan has no turn for this message.",
                    "status": "success", "steps_taken": 0}
        for call in turn.get("calls", []):
            name, arguments = call["name"], dict(call.get("arguments", {}))
            for key in ("file_path", "path"):
                if key in arguments:
                    arguments[key] = self._where(arguments[key])
            self.console.print_tool_usage(name)
            self.console.pretty_print_json(arguments, "Arguments")
            try:
                result = self._execute_tool(name, arguments)
            except Exception as exc:  # the call is the evidence; its failure is its result
                result = {"status": "error", "error": str(exc)}
            self.console.pretty_print_json(
                result if isinstance(result, dict) else {"result": str(result)}, "Result")
            self.console.print_tool_complete()
        answer = turn["answer"]
        return {"result": answer, "status": "success", "steps_taken": len(turn.get("calls", []))}
