"""trialbox's reference document agent for the GAIA Agent UI (amd-gaia 0.25.1).

Why this file exists: the amd-gaia wheel on PyPI ships no agent, and since 0.25 the Agent UI
only loads Python agents from ``$GAIA_HOME/agents/<id>/agent.py``. The entrypoint copies this
file there so the UI under test has one document-answering agent built from GAIA's own tool
mixins (RAG + file search). Everything else — the agent loop, the tools, indexing, retrieval —
is GAIA's code; only the wiring and the system prompt are ours.

The GAIA mixins read host attributes they do not create themselves (``rag``, ``indexed_files``,
``max_chunks``, ``current_session``, ``session_manager``, ``watch_directories``) and call
``_generate_search_keys``; all of them must exist before ``Agent.__init__`` registers tools.
"""

from __future__ import annotations

import os
import re
from typing import Any

from gaia.agents.base.agent import Agent
from gaia.agents.tools.file_tools import FileSearchToolsMixin
from gaia.agents.tools.rag_tools import RAGToolsMixin
from gaia.llm.lemonade_client import DEFAULT_MODEL_NAME
from gaia.rag.sdk import RAGSDK, RAGConfig
from gaia.security import PathValidator

#: How many retrieved chunks the RAG tools hand back per query.
CHUNKS_PER_QUERY = 5

#: Words that carry no retrieval signal; dropped when building the keyword-only search key.
_STOPWORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "by", "can", "could", "did", "do", "does", "for",
        "from", "had", "has", "have", "how", "i", "in", "is", "it", "its", "me", "my", "of", "on",
        "or", "our", "please", "said", "says", "tell", "that", "the", "their", "there", "this", "to",
        "was", "we", "were", "what", "when", "where", "which", "who", "why", "will", "with", "would",
        "you", "your",
    }
)  # fmt: skip

SYSTEM_PROMPT = """\
You are a document assistant. Users attach documents to this conversation and ask questions
about them. Work like this:

1. Answer from the indexed documents. For any question about their content, call a document
   search tool (query_documents, or query_specific_file when the user names a file) before you
   answer, even if you think you already know.
2. Search before refusing. Never say a document lacks something until you have searched for
   it; if the first search misses, try once more with different words.
3. When the documents do not contain the fact, say so plainly (for example: "The documents do
   not say.") and do not fill the gap with a guess.
4. Never invent numbers, names, dates or sources. Quote figures exactly as the document gives
   them, and name the document the answer came from.
5. Keep answers short and direct. Earlier turns of this conversation are context: use them.
"""


def _keywords(query: str) -> str:
    """The query with filler words removed: a second, sharper key for retrieval."""
    words = re.findall(r"[\w$%.,'-]+", query.lower())
    return " ".join(w for w in words if w not in _STOPWORDS)


class TrialboxDocumentAgent(Agent, RAGToolsMixin, FileSearchToolsMixin):
    """Answers questions from the documents indexed into its Agent UI session."""

    AGENT_ID = "gaia"  # the id both the browser UI and the default agent type accept
    AGENT_NAME = "trialbox document agent"
    AGENT_DESCRIPTION = "Answers from indexed documents using GAIA's RAG and file-search tools."
    CONVERSATION_STARTERS = ("What do my documents say about this topic?",)

    def __init__(
        self,
        *,
        model_id: str | None = None,
        base_url: str | None = None,
        streaming: bool = False,
        silent_mode: bool = True,
        debug: bool = False,
        device: str | None = None,
        min_context_size: int | None = None,
        max_steps: int | None = None,
        # Session kwargs the Agent UI passes (gaia.ui._chat_helpers._session_agent_kwargs).
        # Declared one by one because GAIA's factory drops any keyword the class does not
        # name, and a dropped ``allowed_paths`` silently widens the path policy.
        rag_documents: list[str] | None = None,
        library_documents: list[str] | None = None,
        allowed_paths: list[str] | None = None,
        ui_session_id: str | None = None,
    ) -> None:
        # Without an explicit model id GAIA sends no native tool schemas to the model.
        model_id = model_id or os.environ.get("TRIALBOX_AGENT_MODEL") or DEFAULT_MODEL_NAME
        self.ui_session_id = ui_session_id
        self.library_documents = list(library_documents or [])
        self.path_validator = PathValidator(allowed_paths=list(allowed_paths or []) or None)
        self.rag = RAGSDK(
            RAGConfig(
                model=model_id,
                base_url=base_url,
                max_chunks=CHUNKS_PER_QUERY,
                allowed_paths=list(allowed_paths or []) or None,
            ),
            path_validator=self.path_validator,
        )
        self.indexed_files: set = set()
        self.max_chunks = CHUNKS_PER_QUERY
        self.current_session = None  # no CLI session store: the Agent UI owns sessions
        self.session_manager = None
        self.watch_directories: list[str] = []
        super().__init__(
            model_id=model_id,
            base_url=base_url,
            streaming=streaming,
            silent_mode=silent_mode,
            debug=debug,
            device=device,
            min_context_size=min_context_size,
            max_steps=max_steps,
        )
        # The UI indexes session documents itself (with progress events) when it passes an
        # empty list; on its non-streaming path it hands them here instead.
        for path in rag_documents or []:
            self._index_quietly(path)

    def _index_quietly(self, path: str) -> None:
        result: Any = self.rag.index_document(path)
        if isinstance(result, dict) and not result.get("error"):
            self.indexed_files.add(path)

    def _register_tools(self) -> None:
        self.register_rag_tools()
        self.register_file_search_tools()

    def _get_system_prompt(self) -> str:
        return SYSTEM_PROMPT

    def _generate_search_keys(self, query: str) -> list[str]:
        """Retrieval keys for one question: the question as asked, then its content words."""
        keys = [query.strip()]
        sharper = _keywords(query)
        if sharper and sharper != keys[0].lower():
            keys.append(sharper)
        return [k for k in keys if k]
