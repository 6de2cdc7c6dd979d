"""`python -m runner.cli`: the same command as the `trialbox` script."""

from runner.cli.app import main

main()
