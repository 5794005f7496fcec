"""How the CLI, the demo and the benchmark print: a console, plain tables, journals
as tables, and short forms of times, ages, JSON and notes."""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime
from typing import Any, Final

import click
from rich import box
from rich.console import Console
from rich.table import Table

from venturi.models import JournalRecord

_PIPE_WIDTH: Final = 200


def console() -> Console:
    """A console on the current stdout (so click's test runner captures it). Piped
    output gets wide lines rather than rich's 80 columns, so tables stay one row a job."""
    stream = sys.stdout  # click.get_text_stream is deprecated from click 8.5
    width = None if stream.isatty() or "COLUMNS" in os.environ else _PIPE_WIDTH
    return Console(file=stream, width=width, highlight=False, soft_wrap=False)


def table(*columns: str, title: str | None = None, footer: bool = False) -> Table:
    """A plain table (rule under the header, no frame), the first column never wrapped."""
    grid = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE if footer else box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
        show_footer=footer,
    )
    for index, name in enumerate(columns):
        grid.add_column(name, no_wrap=index == 0, overflow="fold")
    return grid


def show_time(value: datetime | None) -> str:
    return "" if value is None else value.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def show_age(seconds: float | None) -> str:
    """``3d4h``, ``5m12s``, ``0.4s``: a short human age."""
    if seconds is None:
        return ""
    if seconds < 10:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes}m"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


def show_json(value: Any) -> str:
    return "" if value is None else json.dumps(value, sort_keys=True, ensure_ascii=False)


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False))


def summary(note: str | None) -> str:
    """One line of a journal note: a traceback's last line, or the note's first."""
    lines = [line for line in (note or "").splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[-1] if lines[0].startswith("Traceback") else lines[0]
    return line if len(lines) == 1 else f"{line} (+{len(lines) - 1} lines)"


def journal_table(entries: list[JournalRecord], title: str = "journal") -> Table:
    """A journal as a table, one row per transition."""
    grid = table("run", "outcome", "recorded", "note", "attachment", title=title)
    for entry in entries:
        grid.add_row(
            str(entry.run_no),
            entry.outcome.value,
            show_time(entry.recorded_at),
            summary(entry.note),
            show_json(entry.attachment),
        )
    return grid
