"""From evidence to verdicts, purely: exact checks, scoring rules, trials, prices."""
