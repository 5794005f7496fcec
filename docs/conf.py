"""Sphinx configuration of the venturi documentation (MyST Markdown, the furo theme).

Build it with ``python -m sphinx -W --keep-going -b html docs docs/_build/html``; every
diagram and chart is rendered during the build, offline.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import venturi

DOCS = Path(__file__).parent
sys.path.insert(0, str(DOCS / "_ext"))

project = "venturi"
author = "the venturi authors"
copyright = "the venturi authors"
release = venturi.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.graphviz",
    "sphinx_click",
    "benchmark_chart",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

myst_enable_extensions = ["colon_fence", "deflist", "attrs_inline"]
# Sections get anchors so pages can link to one another's headings.
myst_heading_anchors = 3

html_theme = "furo"
html_title = f"venturi {release}"
html_static_path = ["_static"]
html_css_files = ["venturi.css"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = False

graphviz_output_format = "svg"

# The docstrings name code in single backquotes: link it where it resolves, else show
# it as code.
default_role = "py:obj"


# The signature is autodoc-process-docstring's.
def markdown_fences_to_rst(  # noqa: PLR0917
    app: object, what: str, name: str, obj: object, options: object, lines: list[str]
) -> None:
    """Render the Markdown code fences of venturi's docstrings as reST code blocks.

    The docstrings are written to be read in an editor and with ``help()``, where a
    fenced block reads best; autodoc parses them as reST, where it would not.
    """
    converted: list[str] = []
    fence_indent: str | None = None
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("```"):
            if fence_indent is None:
                fence_indent = line[: len(line) - len(line.lstrip())]
                language = stripped.removeprefix("```").strip() or "text"
                converted += [f"{fence_indent}.. code-block:: {language}", ""]
            else:
                converted.append("")
                fence_indent = None
            continue
        converted.append(
            f"{fence_indent}   {line[len(fence_indent) :]}"
            if fence_indent is not None and line
            else line
        )
    lines[:] = converted


def setup(app: Any) -> None:
    """Hook the docstring conversion into autodoc."""
    app.connect("autodoc-process-docstring", markdown_fences_to_rst)
