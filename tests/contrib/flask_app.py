"""An example Flask app: a request writes a note and enqueues its publication in one
transaction (plain psycopg, or a SQLAlchemy session); an in-process worker publishes it."""

from __future__ import annotations

from typing import Any

import psycopg
from flask import Flask, abort, current_app, request
from psycopg import sql
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from venturi.contrib.flask import Venturi
from venturi.contrib.sqlalchemy import psycopg_connection

venturi = Venturi()


@venturi.job("notes.publish", max_attempts=2)
def publish(note_id: int) -> int:
    """Runs in a worker thread, inside the app's context (so current_app works)."""
    table = sql.Identifier(current_app.config["NOTES_TABLE"])
    with psycopg.connect(current_app.config["NOTES_DSN"]) as conn:
        conn.execute(
            sql.SQL("UPDATE {} SET published = true WHERE id = %s").format(table), [note_id]
        )
    return note_id


def create_app(dsn: str, prefix: str, table: str, **config: Any) -> Flask:
    """The app factory: the extension is initialised per app, each with its own queue."""
    app = Flask(__name__)
    app.config.update(
        TESTING=True,
        VENTURI_DSN=dsn,
        VENTURI_PREFIX=prefix,
        NOTES_DSN=dsn,
        NOTES_TABLE=table,
        **config,
    )
    venturi.init_app(app)
    engine = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(dsn))
    insert = sql.SQL("INSERT INTO {} (body) VALUES (%s) RETURNING id").format(sql.Identifier(table))

    quoted = sql.Identifier(table).as_string()
    insert_sa = text(f"INSERT INTO {quoted} (body) VALUES (:body) RETURNING id")

    @app.post("/notes")
    def add_note() -> dict[str, Any]:
        with psycopg.connect(dsn) as conn, conn.transaction():
            row = conn.execute(insert, [request.form["body"]]).fetchone()
            assert row is not None
            job_id = publish.enqueue_with({"note_id": row[0]}, conn=conn)
            if request.form.get("fail"):
                abort(500)  # leaves the transaction: the note and its job roll back
        return {"note": row[0], "job": str(job_id)}

    @app.post("/sa/notes")
    def add_note_sqlalchemy() -> dict[str, Any]:
        with Session(engine) as session:
            note_id = session.execute(insert_sa, {"body": request.form["body"]}).scalar_one()
            job_id = venturi.enqueue(
                "notes.publish", {"note_id": note_id}, conn=psycopg_connection(session)
            )
            if request.form.get("fail"):
                session.rollback()
            else:
                session.commit()
        return {"note": note_id, "job": str(job_id)}

    app.extensions["notes_engine"] = engine
    return app
