"""`python -m venturi` runs the `venturi` command."""

from venturi.cli.main import main

main()
