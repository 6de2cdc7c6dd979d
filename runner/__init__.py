"""trialbox: a containerised, self-hosted evaluation appliance for LLM agents.

Data flows one way: scenario → sandbox → conversation → evidence → judgments → score → report.
Each arrow is one module of this package; see design/architecture.md.
"""

__version__ = "0.1.0"
