"""The Docker labels trialbox puts on what it creates: one spelling each, so a sweep finds it all."""

#: The run (or fix, or bench) that created the object; cleanup removes by this label.
RUN_LABEL = "trialbox.run"
#: What the object is for: "agent-ui" (a sandbox), "llm", "firewall", "fixer", ...
ROLE_LABEL = "trialbox.role"
#: The scenario a sandbox was made for.
SCENARIO_LABEL = "trialbox.scenario"
