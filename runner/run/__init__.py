"""One run from settings to scorecard: launch, engine, progress, exit codes, cleanup."""
