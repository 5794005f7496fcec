"""``manage.py venturi worker|migrate|stats|...``: venturi's command line on the project's queue."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

import click
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections
from django.utils.module_loading import autodiscover_modules

from venturi.contrib.django.conf import VenturiSettings
from venturi.contrib.django.queue import get_queue

# Handled by manage.py itself before the command runs; click would reject them.
_DJANGO_OPTIONS = ("--settings", "--pythonpath")


def _forwarded(args: Sequence[str]) -> list[str]:
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in _DJANGO_OPTIONS:
            skip = True
        elif not arg.startswith(tuple(f"{o}=" for o in _DJANGO_OPTIONS)):
            kept.append(arg)
    return kept


def run_cli(args: Sequence[str], prog_name: str = "manage.py venturi") -> int:
    """Run the venturi click group on the project's queue; returns the exit status.

    Imports each app's ``VENTURI['AUTODISCOVER']`` modules first, and registers the tasks
    of the project's Celery-compatible apps, so the worker knows every registered job.
    """
    from venturi.cli.main import build_cli

    autodiscover_modules(*VenturiSettings.load().autodiscover)
    # A project that made a Celery-compatible app (its proj/__init__.py imports it)
    # has tasks to register; one that did not never imports the module.
    if "venturi.contrib.celery" in sys.modules:
        from venturi.contrib.celery.app import start_django_apps

        start_django_apps()
    group = build_cli(get_queue)
    try:
        result = group.main(args=list(args), prog_name=prog_name, standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.Abort:
        click.echo("Aborted!", err=True)
        return 1
    return result if isinstance(result, int) else 0


class Command(BaseCommand):
    help = (
        "venturi's command line on this project's queue: worker, migrate, stats, job, "
        "history, cleanup, cancel, requeue, ... (`manage.py venturi --help`)"
    )

    def run_from_argv(self, argv: list[str]) -> None:
        """Hand everything after ``venturi`` to click (argparse would swallow --help)."""
        prog = f"{os.path.basename(argv[0])} {argv[1]}"
        try:
            code = run_cli(_forwarded(argv[2:]), prog_name=prog)
        finally:
            connections.close_all()
        if code:
            sys.exit(code)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("args", nargs=argparse.REMAINDER, help="venturi sub-command")

    def handle(self, *args: str, **options: Any) -> None:
        """For ``call_command("venturi", "stats")``; raises `CommandError` on failure."""
        code = run_cli(args)
        if code:
            raise CommandError(
                f"venturi {' '.join(args)} exited with status {code}", returncode=code
            )
