"""Put a table the code makes between a page's `<!-- NAME -->` and `<!-- /NAME -->` markers: what
tools/docs_settings.py and tools/docs_formats.py share (each test compares the page with the code)."""

import re
from pathlib import Path


def rewrite(page: Path, name: str, table: str) -> None:
    text = page.read_text()
    new, n = re.subn(
        rf"(<!-- {name} -->\n).*?(<!-- /{name} -->)",
        lambda m: m.group(1) + table + m.group(2),
        text,
        flags=re.S,
    )
    if n != 1:
        raise SystemExit(f"docs/{page.name}: the {name} markers are missing")
    page.write_text(new)
    print(f"docs/{page.name}: {name} rewritten" if new != text else f"docs/{page.name}: {name} already current")
