"""Rewrite the table of formats in docs/say.md from the code's table: `python tools/docs_formats.py`.

tests/test_formats.py fails when the page's table and `media.formats.AUDIO_FORMATS` differ; this puts
the table `formats_table()` makes between the page's `<!-- formats-table -->` markers.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from omnivoice_cli.media.formats import formats_table  # noqa: E402

page = ROOT / "docs" / "say.md"
text = page.read_text()
new, n = re.subn(
    r"(<!-- formats-table -->\n).*?(<!-- /formats-table -->)",
    lambda m: m.group(1) + formats_table() + m.group(2),
    text,
    flags=re.S,
)
if n != 1:
    raise SystemExit("docs/say.md: the formats table markers are missing")
page.write_text(new)
print("docs/say.md: formats table rewritten" if new != text else "docs/say.md: formats table already current")
