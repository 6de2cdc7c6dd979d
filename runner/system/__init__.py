"""This machine as every layer needs it: trialbox's folders, files from elsewhere, ports, processes."""
