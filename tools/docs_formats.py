"""Rewrite the table of formats in docs/say.md from the code's table: `python tools/docs_formats.py`.

tests/test_formats.py fails when the page's table and `media.formats.AUDIO_FORMATS` differ; this puts
the table `formats_table()` makes between the page's `<!-- formats-table -->` markers.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from docs_table import rewrite  # noqa: E402

from omnivoice_cli.media.formats import formats_table  # noqa: E402

rewrite(ROOT / "docs" / "say.md", "formats-table", formats_table())
