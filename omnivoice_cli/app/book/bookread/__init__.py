"""Reading a book into chapters: EPUB, Markdown, plain text (`open_book`: bookread/open.py; the map: docs/design.md)."""
