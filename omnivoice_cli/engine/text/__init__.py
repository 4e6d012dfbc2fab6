"""The text front end: the tokenizer, the text of a canvas, chunking, durations, languages, instructs, markup, normalisation, tags (the map: docs/design.md)."""
