"""Fresh, isolated GAIA Agent UI + MCP bridge per scenario (see _protocol for the contract)."""

from runner.sandbox._protocol import Sandbox, SandboxBackend, SandboxError
from runner.sandbox.local import LocalBackend, LocalSandbox

__all__ = ["LocalBackend", "LocalSandbox", "Sandbox", "SandboxBackend", "SandboxError"]
