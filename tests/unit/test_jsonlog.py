"""`venturi.jsonlog.JsonFormatter`: one JSON object per record, extras included."""

from __future__ import annotations

import json
import logging
import sys

from venturi.jsonlog import JsonFormatter


def _record(**extra: object) -> logging.LogRecord:
    record = logging.LogRecord(
        "venturi.worker", logging.WARNING, __file__, 1, "job %s", ("x",), None
    )
    record.__dict__.update(extra)
    return record


def test_a_record_with_job_fields_is_one_json_line() -> None:
    text = JsonFormatter().format(_record(job_id="01ABC", kind="emails.send", run=2))
    assert "\n" not in text
    line = json.loads(text)
    assert line["message"] == "job x" and line["level"] == "WARNING"
    assert line["logger"] == "venturi.worker"
    assert (line["job_id"], line["kind"], line["run"]) == ("01ABC", "emails.send", 2)
    assert line["time"].endswith("+00:00")
    assert "args" not in line and "msg" not in line  # the record's own attributes stay out


def test_exceptions_and_unserialisable_extras_are_text() -> None:
    try:
        raise ValueError("multi\nline")
    except ValueError:
        record = _record(payload=object())
        record.exc_info = sys.exc_info()
    line = json.loads(JsonFormatter().format(record))
    assert "ValueError: multi\nline" in line["exception"]
    assert line["payload"].startswith("<object object")
