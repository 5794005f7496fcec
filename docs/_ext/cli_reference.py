"""The ``venturi`` command group as an attribute, for sphinx-click (which documents an
object, not a factory): ``{click} cli_reference:command``.

sphinx-click lists a group's ``commands`` mapping, so ``bench``, which the group loads
only when it is asked for, is added to this copy for the reference to show it.
"""

import click

from venturi.cli import build_cli

command = build_cli()
_bench = command.get_command(click.Context(command), "bench")
if _bench is not None:
    command.add_command(_bench)
