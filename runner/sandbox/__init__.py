"""Fresh, isolated GAIA Agent UI + MCP bridge per scenario (see _protocol for the contract).

The face is light on purpose: the Docker backend (``runner.sandbox.docker``) is imported by
who runs Docker sandboxes, not by every importer of this package.
"""

from runner.sandbox._collect import fetch_meter, llm_admin_token, own_meter_records
from runner.sandbox._firewall import Firewall, FirewallError, isolate_network, release_network
from runner.sandbox._firewall import sweep as sweep_firewall
from runner.sandbox._fixtures import stage_fixtures
from runner.sandbox._hardening import LLM_CPU_SHARES, HardeningConfigError
from runner.sandbox._protocol import Sandbox, SandboxBackend, SandboxError
from runner.sandbox.attach import AttachBackend, AttachedSandbox
from runner.sandbox.local import LocalBackend, LocalSandbox
from runner.sandbox.names import safe_name, sandbox_name

__all__ = [
    "stage_fixtures",
    "LLM_CPU_SHARES",
    "AttachBackend",
    "AttachedSandbox",
    "Firewall",
    "FirewallError",
    "HardeningConfigError",
    "LocalBackend",
    "LocalSandbox",
    "Sandbox",
    "SandboxBackend",
    "SandboxError",
    "fetch_meter",
    "own_meter_records",
    "isolate_network",
    "llm_admin_token",
    "release_network",
    "safe_name",
    "sandbox_name",
    "sweep_firewall",
]
