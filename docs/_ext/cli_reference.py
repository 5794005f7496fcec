"""The ``venturi`` command group as an attribute, for sphinx-click (which documents an
object, not a factory): ``{click} cli_reference:command``."""

from venturi.cli import build_cli

command = build_cli()
