"""Fresh, isolated GAIA Agent UI + MCP bridge per scenario (see _protocol for the contract)."""

from runner.sandbox._hardening import HardeningConfigError
from runner.sandbox._protocol import Sandbox, SandboxBackend, SandboxError
from runner.sandbox.attach import AttachBackend, AttachedSandbox
from runner.sandbox.local import LocalBackend, LocalSandbox

__all__ = [
    "AttachBackend",
    "AttachedSandbox",
    "HardeningConfigError",
    "LocalBackend",
    "LocalSandbox",
    "Sandbox",
    "SandboxBackend",
    "SandboxError",
]
