"""``manage.py`` of the example project; the tests run ``manage.py venturi worker`` with it.

Configured from SHOP_DSN, SHOP_TABLE and SHOP_PREFIX in the environment.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from django.conf import settings
    from django.core.management import execute_from_command_line

    from tests.contrib.django.project import build_settings

    env = os.environ
    settings.configure(**build_settings(env["SHOP_DSN"], env["SHOP_TABLE"], env["SHOP_PREFIX"]))
    execute_from_command_line(sys.argv)
