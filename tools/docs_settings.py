"""Rewrite the settings table of docs/settings.md from the schema: `python tools/docs_settings.py`.

tests/test_schema.py fails when the page's table and `schema.SCHEMA` differ; this puts the
table the schema makes between the page's `<!-- settings-table -->` markers.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from docs_table import rewrite  # noqa: E402

from omnivoice_cli.ui.options import settings_table  # noqa: E402

rewrite(ROOT / "docs" / "settings.md", "settings-table", settings_table())
