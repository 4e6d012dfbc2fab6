"""`omnivoice book`: a book (EPUB, Markdown, plain text) into an audiobook, on the batch run (the map: docs/design.md)."""
