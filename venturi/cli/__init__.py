"""The ``venturi`` command line: commands, the demo and the tables they render."""

from venturi.cli.main import build_cli, main

__all__ = ["build_cli", "main"]
