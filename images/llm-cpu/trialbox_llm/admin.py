"""Who may change what every client of this shared server depends on: the admin token.

Why: the server is attached to every sandbox network, so the agent under test (and any code it
runs) can call the Lemonade management API. A load that restarts a model with other settings
changes the model every other sandbox is talking to, mid-run. Those requests must come from
trialbox itself, which knows the token (`TRIALBOX_LLM_ADMIN_TOKEN`, given to the container by
compose); a sandbox never gets it.

What needs the token is decided by the effect, not by the route, because GAIA's Agent UI calls
the management routes itself and must keep working without a token:

- `load` of a model that already runs with what the request asks changes nothing: free (GAIA
  0.25.1 loads its chat model and embedder so at every start). A load that needs a restart
  needs the token.
- `unload` never stops a model here (kept resident, see `routes`), and `pull` of a bundled
  model downloads nothing: both are no-ops, free for everyone (GAIA tolerates either answer).
- Lemonade's `params` and `delete` would change shared state; this server does not implement
  them, so they answer 403 without the token and 501 (not implemented) with it.

Inference and status routes (chat/completions, embeddings, models, health, stats,
system-info, live) never look at the token. A server started without a token refuses every
state-changing request: the safe default, and GAIA never needs one.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass

ADMIN_TOKEN_ENV = "TRIALBOX_LLM_ADMIN_TOKEN"
#: Short tokens can be guessed by a sandbox that tries; 32 characters is what
#: `secrets.token_urlsafe(24)` gives and what GAIA's own MCP bridge asks of its token.
MIN_TOKEN_CHARS = 32


class AdminTokenError(ValueError):
    """The configured admin token is unusable; the message names the variable and the fix."""


class AdminRequiredError(Exception):
    """A state-changing request came without the admin token (answered with HTTP 403)."""

    def __init__(self, action: str, configured: bool) -> None:
        self.action = action
        if configured:
            fix = (
                "send the admin token as `Authorization: Bearer <token>` (trialbox has it in "
                f"{ADMIN_TOKEN_ENV})"
            )
        else:
            fix = (
                f"this server was started without {ADMIN_TOKEN_ENV}, so no client may; start it "
                "with one to allow it"
            )
        super().__init__(
            f"{action} changes what every client of this shared server uses, so it needs the "
            f"admin token: {fix}. Loads the running model already satisfies, unloads and pulls "
            "of bundled models need none."
        )


def token_from_environment(env: Mapping[str, str]) -> str | None:
    """The admin token from `TRIALBOX_LLM_ADMIN_TOKEN`: None when unset or empty."""
    token = env.get(ADMIN_TOKEN_ENV, "").strip()
    if not token:
        return None
    if len(token) < MIN_TOKEN_CHARS:
        raise AdminTokenError(
            f"{ADMIN_TOKEN_ENV} is {len(token)} characters long; use at least "
            f"{MIN_TOKEN_CHARS} (e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)"
            ", or leave it unset to refuse every state-changing request"
        )
    return token


def bearer(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (scheme case-insensitive)."""
    if not authorization:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


@dataclass(frozen=True)
class AdminGuard:
    """Checks requests against the configured token (None = nobody is an admin)."""

    token: str | None = None

    @property
    def configured(self) -> bool:
        return self.token is not None

    def is_admin(self, authorization: str | None) -> bool:
        offered = bearer(authorization)
        if self.token is None or offered is None:
            return False
        # Constant time: a sandbox must not learn the token a character at a time.
        return hmac.compare_digest(offered.encode(), self.token.encode())

    def require(self, authorization: str | None, action: str) -> None:
        """Raise `AdminRequiredError` unless the request carries the admin token."""
        if not self.is_admin(authorization):
            raise AdminRequiredError(action, self.configured)
