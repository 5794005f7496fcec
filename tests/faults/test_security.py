"""Security: hostile names are refused, a role's grants fence its prefix, venturi never
builds SQL from strings or unpickles, and a DSN's password never reaches a log or error."""

from __future__ import annotations

import ast
import logging
import secrets
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

import venturi
from tests.faults.scenario import ledger_queue
from tests.faults.server import ThrowawayServer
from tests.support import drop_prefix, fresh_prefix, wait_until
from venturi.models import NewJob
from venturi.prefix import Prefix

PACKAGE = Path(venturi.__file__).parent

HOSTILE_NAMES = [
    "jobs; DROP TABLE users; --",
    "jobs' OR '1'='1",
    'jobs"; DROP TABLE users; --',
    "jobs/**/",
    "jobs\x00",
    "jobs\n",
    "j\u043ebs",  # Cyrillic o
    "\u0458obs",  # Cyrillic je
    "jobs\u200b",  # zero-width space
    "\uff4aobs",  # fullwidth j
    "jo\u0299s",  # small capital B
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_injection_and_lookalike_prefixes_are_refused(name: str) -> None:
    with pytest.raises(venturi.InvalidPrefix, match="prefix"):
        Prefix(name)


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_injection_and_lookalike_kinds_are_refused(name: str) -> None:
    with pytest.raises(venturi.InvalidJob, match="kind"):
        NewJob(name)


_UNSAFE_MODULES = {"pickle", "cPickle", "marshal", "shelve", "dill", "cloudpickle", "jsonpickle"}
_UNSAFE_CALLS = {"eval", "exec", "compile", "__import__"}
_EXECUTING = {"execute", "executemany"}


def _text_built(node: ast.expr) -> bool:
    """An f-string, ``%``-formatting, ``+`` concatenation or ``.format`` call."""
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod | ast.Add):
        return True
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Constant)
    )


def _sql_source_ok(node: ast.expr, literal_params: set[str]) -> bool:
    """What ``sql.SQL`` may wrap: a literal, a file loaded by venturi.store.sqlfiles (``text``),
    or a parameter typed ``LiteralString`` (so mypy holds every caller to a literal)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return True
    if isinstance(node, ast.Name) and node.id in literal_params:
        return True
    return isinstance(node, ast.Call) and getattr(node.func, "id", None) == "text"


def _literal_params(tree: ast.Module) -> dict[ast.AST, set[str]]:
    """For each node inside a function, that function's ``LiteralString`` parameters."""
    scopes: dict[ast.AST, set[str]] = {}
    for func in ast.walk(tree):
        if isinstance(func, ast.FunctionDef):
            names = {
                a.arg
                for a in func.args.args + func.args.kwonlyargs
                if a.annotation is not None and "LiteralString" in ast.unparse(a.annotation)
            }
            for inner in ast.walk(func):
                scopes.setdefault(inner, set()).update(names)
    return scopes


def _findings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    literal_params = _literal_params(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            if any(n.split(".")[0] in _UNSAFE_MODULES for n in names):
                found.append(f"{where}: imports {names}")
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if isinstance(func, ast.Name) and name in _UNSAFE_CALLS:
            found.append(f"{where}: calls {name}()")
        if name in _EXECUTING and node.args and _text_built(node.args[0]):
            found.append(f"{where}: {name}() of a query built from strings")
        allowed = literal_params.get(node, set())
        if name == "SQL" and node.args and not _sql_source_ok(node.args[0], allowed):
            found.append(f"{where}: sql.SQL() of something other than a literal or a SQL file")
    return found


def test_the_checker_catches_what_it_looks_for(tmp_path: Path) -> None:
    bad = PACKAGE.parent / "venturi_security_probe.py"
    bad.write_text(
        "import pickle\nfrom psycopg import sql\n"
        "def f(cur, t, x):\n"
        "    cur.execute(f'SELECT {t}')\n"
        "    cur.execute('SELECT ' + t)\n"
        "    cur.execute('SELECT %s' % t)\n"
        "    cur.execute('SELECT {}'.format(t))\n"
        "    sql.SQL(t)\n"
        "def g(t: LiteralString, u: str):\n"
        "    sql.SQL(t)\n"
        "    sql.SQL(u)\n"
        "    eval(x)\n"
    )
    try:
        assert len(_findings(bad)) == 8
    finally:
        bad.unlink()


def test_no_pickle_eval_exec_or_string_built_sql_in_venturi() -> None:
    files = sorted(PACKAGE.rglob("*.py"))
    findings = [finding for path in files for finding in _findings(path)]
    print(f"\nscanned {len(files)} modules of venturi/: {len(findings)} findings")
    assert not findings, "\n".join(findings)


@pytest.fixture
def roles(own_server: ThrowawayServer) -> Iterator[dict[str, str]]:
    """Two login roles with random passwords on the private server; dropped afterwards."""
    made = {f"venturi_role_{secrets.token_hex(4)}": secrets.token_urlsafe(12) for _ in range(2)}
    with psycopg.connect(own_server.dsn, autocommit=True) as conn:
        for name, password in made.items():
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(name), sql.Literal(password)
                )
            )
    yield made
    with psycopg.connect(own_server.dsn, autocommit=True) as conn:
        for name in made:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def _grant_prefix(dsn: str, prefix: str, role: str) -> None:
    """What an operator grants a role to use one prefix (the tables stay the owner's)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON {} TO {}").format(
                sql.SQL(", ").join(
                    sql.Identifier(f"{prefix}_{table}")
                    for table in (
                        "jobs",
                        "journal",
                        "kinds",
                        "schedules",
                        "schema_history",
                        "steps",
                        "signals",
                        "waits",
                        "fair_weights",
                    )
                ),
                sql.Identifier(role),
            )
        )
        conn.execute(
            sql.SQL("GRANT USAGE ON SEQUENCE {} TO {}").format(
                sql.Identifier(f"{prefix}_journal_id_seq"), sql.Identifier(role)
            )
        )


def test_a_role_granted_one_prefix_cannot_touch_another(
    own_server: ThrowawayServer, roles: dict[str, str]
) -> None:
    role, password = next(iter(roles.items()))
    mine, theirs = fresh_prefix("mine"), fresh_prefix("theirs")
    for name in (mine, theirs):
        with venturi.Queue(own_server.dsn, prefix=name) as owner:
            owner.migrate()
            owner.enqueue("k", {"owner": True})
    _grant_prefix(own_server.dsn, mine, role)
    dsn = own_server.dsn_for(role, password)
    try:
        with venturi.Queue(dsn, prefix=mine) as allowed:
            job_id = allowed.enqueue("k", {"by": role})
            assert allowed.get(job_id) is not None
            assert allowed.store.claim("w", {"k": 30}, 5)
        with venturi.Queue(dsn, prefix=theirs) as fenced:
            attempts = {
                "enqueue": lambda: fenced.enqueue("k", {}),
                "claim": lambda: fenced.store.claim("w", {"k": 30}, 5),
                "history": fenced.history,
                "migrate": fenced.migrate,
            }
            refused = {}
            for what, attempt in attempts.items():
                with pytest.raises(venturi.StoreError, match="permission denied") as denied:
                    attempt()
                assert isinstance(denied.value.__cause__, psycopg.errors.InsufficientPrivilege)
                assert not isinstance(denied.value, venturi.StoreUnavailable)  # not retried
                refused[what] = str(denied.value).splitlines()[0]
        with psycopg.connect(own_server.dsn) as conn:
            rows = conn.execute(
                sql.SQL(
                    "SELECT count(*), count(*) FILTER (WHERE status = 'pending') FROM {}"
                ).format(sql.Identifier(f"{theirs}_jobs"))
            ).fetchone()
        print(f"\nrole granted {mine!r} only, against {theirs!r}: {refused}")
        assert rows == (1, 1), "the other prefix's jobs changed"
    finally:
        drop_prefix(own_server.dsn, mine)
        drop_prefix(own_server.dsn, theirs)


def _leaks(secret: str, exc: BaseException | None, records: list[logging.LogRecord]) -> list[str]:
    found = []
    chain: BaseException | None = exc
    while chain is not None:  # the chain a traceback shows ("from None" hides the context)
        if secret in str(chain) or secret in repr(chain):
            found.append(f"{type(chain).__name__}: {chain}")
        hidden = chain.__suppress_context__
        chain = chain.__cause__ or (None if hidden else chain.__context__)
    for record in records:
        text = record.getMessage() + (str(record.exc_info[1]) if record.exc_info else "")
        if secret in text:
            found.append(f"log {record.name}: {text}")
    return found


def _malformed_dsn_errors(role: str, password: str) -> list[venturi.ConfigurationError]:
    """The errors for DSNs whose parse errors would quote (part of) the password: an
    unquoted space inside it, and a URI that libpq cannot parse."""
    errors = []
    for dsn in (
        f"host=127.0.0.1 password={password[:6]} {password[6:]}",
        f"postgresql://{role}:{password}@[::1/postgres",
    ):
        with pytest.raises(venturi.ConfigurationError) as malformed:
            venturi.Queue(dsn, prefix="anything")
        errors.append(malformed.value)
    return errors


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_dsn_password_never_appears_in_logs_or_errors(
    own_server: ThrowawayServer,
    own_prefix: str,
    roles: dict[str, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    role, password = next(iter(roles.items()))
    with psycopg.connect(own_server.dsn, autocommit=True) as conn:  # to own its prefix
        conn.execute(sql.SQL("GRANT CREATE ON SCHEMA public TO {}").format(sql.Identifier(role)))
    caplog.set_level(logging.DEBUG)
    # The right password: a worker runs a job, logging at DEBUG.
    queue, book = ledger_queue(own_server.dsn_for(role, password), own_prefix, worker="secret")
    with queue.worker(concurrency=1, poll_interval=1):
        job_id = queue.enqueue("fault.work", {})
        wait_until(lambda: getattr(queue.get(job_id), "status", None) == "completed", 30)
    queue.close()
    book.close()
    leaks = _leaks(password, None, caplog.records)
    # A wrong password: the enqueue fails, the worker keeps trying, both say why.
    wrong = secrets.token_urlsafe(12)
    caplog.clear()
    bad = venturi.Queue(own_server.dsn_for(role, wrong), prefix=own_prefix, pool_timeout=2)
    with pytest.raises(venturi.StoreUnavailable) as failed:
        bad.enqueue("fault.work", {})
    bad.job("fault.work")(lambda: None)
    with bad.worker(concurrency=1, poll_interval=1):
        wait_until(lambda: "listener" in caplog.text, 30, what="the worker to log its failure")
    bad.close()
    leaks += _leaks(wrong, failed.value, caplog.records)
    malformed = _malformed_dsn_errors(role, wrong)
    for error in malformed:
        leaks += _leaks(wrong[6:], error, []) + _leaks(wrong, error, [])
    print(
        f"\npassword kept out of {len(caplog.records)} log records and these errors:\n"
        f"  {failed.value}\n  " + "\n  ".join(map(str, malformed))
    )
    assert "password authentication failed" in str(failed.value)
    assert not leaks, leaks
