"""`python -m venturi` runs the `venturi` command."""

from venturi.cli import main

main()
