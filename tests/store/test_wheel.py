"""The wheel built from this checkout holds exactly its package: every module and data file
under venturi/ and sql/ (as venturi.sql), nothing else, and the license. Quick (one wheel
build, seconds); tests/test_installed.py installs and runs it."""

from __future__ import annotations

from pathlib import Path

from tests.support.packaging import (
    build,
    checkout_files,
    copy_checkout,
    wheel_differences,
    wheel_names,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_holds_every_file_of_the_checkouts_package(tmp_path: Path) -> None:
    source = copy_checkout(ROOT, tmp_path / "source")
    [wheel] = build(source, tmp_path / "dist", "--wheel")
    names = wheel_names(wheel)

    assert wheel_differences(checkout_files(ROOT), names) == []
    dist_info = wheel.name.split("-py3")[0] + ".dist-info"
    assert f"{dist_info}/licenses/LICENSE" in names, names
