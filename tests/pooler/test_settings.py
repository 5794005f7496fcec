"""Where the pooler settings arrive: ``prepared_statements`` on the store's pool,
``listen_dsn`` from the Queue, VENTURI_LISTEN_DSN, the CLI, Flask and Django; bad values
refused before anything connects. The server answers directly here: no PgBouncer."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import venturi
from tests.support import postgres_store
from venturi.cli.main import build_cli
from venturi.cli.support import CliState, pass_state
from venturi.contrib.django.conf import SettingsError, VenturiSettings
from venturi.contrib.flask import FlaskSettings
from venturi.prefix import Prefix
from venturi.store.postgres import PostgresStore


def test_preparation_follows_the_setting_straight_to_the_server(
    database_dsn: str, prefix: str
) -> None:
    def store(prepared: object) -> PostgresStore:
        return PostgresStore.from_dsn(
            database_dsn,
            Prefix(prefix),
            pool_size=1,
            prepared_statements=prepared,  # type: ignore[arg-type]
        )

    auto = PostgresStore.from_dsn(database_dsn, Prefix(prefix), pool_size=1)
    off, on = store(False), store(True)
    try:
        for prepares in (auto, on):  # "auto" (the default) prepares: no proxy in between
            with prepares.connection() as conn:
                assert conn.prepare_threshold == 5  # psycopg's default
        with off.connection() as conn:
            assert conn.prepare_threshold is None
        for main, side_prepares in ((off, False), (auto, True)):
            side = main.sibling()
            with side.connection() as conn:
                assert (conn.prepare_threshold is not None) is side_prepares
            side.close()
    finally:
        for opened in (auto, off, on):
            opened.close()


def test_bad_values_are_refused_before_any_pool_opens(database_dsn: str) -> None:
    with pytest.raises(venturi.ConfigurationError, match="prepared_statements must be"):
        venturi.Queue(database_dsn, prefix="p", prepared_statements="no")  # type: ignore[arg-type]
    with pytest.raises(venturi.ConfigurationError, match='True, False or "auto"'):
        venturi.Queue(database_dsn, prefix="p", read_dsn=database_dsn, prepared_statements=1)  # type: ignore[arg-type]
    with pytest.raises(venturi.ConfigurationError, match="listen_dsn is not a valid") as info:
        venturi.Queue(database_dsn, prefix="p", listen_dsn="host=x password='s3cret")
    assert "s3cret" not in str(info.value)


def test_the_listener_uses_listen_dsn_and_its_own_connect_timeout(
    database_dsn: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    listen = f"{database_dsn}?application_name=venturi-listen&connect_timeout=7"
    monkeypatch.setenv("VENTURI_LISTEN_DSN", listen)
    with venturi.Queue(database_dsn, prefix=prefix, pool_size=1) as queue:
        assert _listen_dsn(postgres_store(queue)) == listen
        notifier = postgres_store(queue).notifier()
        try:
            notifier.connect()
            assert notifier.connected and not notifier.polling
            conn = notifier._conn
            assert conn is not None
            assert conn.info.get_parameters()["application_name"] == "venturi-listen"
            assert conn.info.get_parameters()["connect_timeout"] == "7"
            # It leads to the server itself (a pooling proxy makes it poll), so the claim
            # it lends the dispatcher may be prepared, whatever the pool's setting.
            assert conn.prepare_threshold is not None
        finally:
            notifier.close()
    monkeypatch.setenv("VENTURI_LISTEN_DSN", "")
    with venturi.Queue(database_dsn, prefix=prefix, pool_size=1) as queue:
        assert _listen_dsn(postgres_store(queue)) is None


def test_cli_takes_listen_dsn_from_option_or_env(database_dsn: str, prefix: str) -> None:
    seen: list[str | None] = []
    cli = build_cli()

    @cli.command("show-listen")
    @pass_state
    def show(state: CliState) -> None:
        seen.append(_listen_dsn(postgres_store(state.queue())))

    runner = CliRunner()
    env = {"VENTURI_DSN": database_dsn, "VENTURI_PREFIX": prefix}
    listen = f"{database_dsn}?application_name=from-option"
    assert runner.invoke(cli, ["--listen-dsn", listen, "show-listen"], env=env).exit_code == 0
    env["VENTURI_LISTEN_DSN"] = f"{database_dsn}?application_name=from-env"
    assert runner.invoke(cli, ["show-listen"], env=env).exit_code == 0
    assert seen == [listen, env["VENTURI_LISTEN_DSN"]]


def test_flask_and_django_settings_take_a_listen_dsn() -> None:
    flask = FlaskSettings.from_config({"VENTURI_LISTEN_DSN": "host=db"})
    assert flask.listen_dsn == "host=db"
    with pytest.raises(venturi.ConfigurationError, match="VENTURI_LISTEN_DSN must be a str"):
        FlaskSettings.from_config({"VENTURI_LISTEN_DSN": 5432})
    assert VenturiSettings(listen_dsn="host=db").listen_dsn == "host=db"
    assert VenturiSettings().listen_dsn is None
    with pytest.raises(SettingsError, match="LISTEN_DSN"):
        VenturiSettings(listen_dsn="")


def _listen_dsn(store: PostgresStore) -> str | None:
    """The connection string the store's listener connects to instead of the pool's."""
    return None if store.listen is None else store.listen.text
