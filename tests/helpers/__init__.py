"""Helpers shared by the test modules (pytest puts tests/ on sys.path, so ``helpers.runs``
imports as a package): ``runs`` writes run directories by hand and runs the CLI under
limits, ``readers`` composes tiny reader configs, ``cli`` runs the CLI in this process.
Test modules import from here, never from each other."""
