"""Rewrite the settings table of docs/settings.md from the schema: `python tools/docs_settings.py`.

tests/test_schema.py fails when the page's table and `settings.SCHEMA` differ; this puts the
table the schema makes between the page's `<!-- settings-table -->` markers.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from omnivoice_cli.ui.options import settings_table  # noqa: E402

readme = ROOT / "docs" / "settings.md"
text = readme.read_text()
new, n = re.subn(
    r"(<!-- settings-table -->\n).*?(<!-- /settings-table -->)",
    lambda m: m.group(1) + settings_table() + m.group(2),
    text,
    flags=re.S,
)
if n != 1:
    raise SystemExit("docs/settings.md: the settings table markers are missing")
readme.write_text(new)
print(
    "docs/settings.md: settings table rewritten" if new != text else "docs/settings.md: settings table already current"
)
