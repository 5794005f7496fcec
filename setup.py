"""Package discovery that pyproject.toml cannot say: the top-level ``sql/`` tree ships as
the subpackage ``venturi.sql`` (``package-dir`` in pyproject.toml maps it), and
``[tool.setuptools.packages.find]`` has no way to put a prefix on the packages it finds
there. Everything else about the build lives in pyproject.toml."""

from setuptools import find_namespace_packages, setup

LIBRARY = find_namespace_packages(include=["venturi", "venturi.*"])
# Namespace discovery: a folder of SQL files ships even without an __init__.py.
SQL = ["venturi.sql", *(f"venturi.sql.{name}" for name in find_namespace_packages("sql"))]

setup(packages=[*LIBRARY, *SQL])
