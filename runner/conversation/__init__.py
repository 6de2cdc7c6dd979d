"""Talking to the agent under test: its MCP tools, the simulated user, agent definitions."""
