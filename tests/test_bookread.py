"""The book reader (app/book/bookread/): EPUB, Markdown and plain text into chapters, by its rules."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from omnivoice_cli.app.book.bookread import epubzip, xhtml
from omnivoice_cli.app.book.bookread.chapters import count_words, matter_by_title
from omnivoice_cli.app.book.bookread.open import open_book
from omnivoice_cli.app.book.bookread.text import text_heading
from omnivoice_cli.engine.errors import InvalidRequest, MissingExtra

pytest.importorskip("ebooklib")

from tests import epub_util  # noqa: E402
from tests.epub_util import make_epub, rewrite, tiny_png  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _outline(book) -> list[tuple[int, str]]:
    return [(c.number, c.title) for c in book.chapters()]


# ----------------------------------------------------------------------------------------- EPUB


def test_an_epub_reads_as_its_three_chapters(tmp_path):
    book = open_book(make_epub(tmp_path / "book.epub"))
    chapters = list(book.chapters())
    assert [(c.number, c.title) for c in chapters] == [(1, "The Storm"), (2, "The Lamp"), (3, "The Morning")]
    assert [c.text for c in chapters] == epub_util.CHAPTER_TEXTS
    assert [c.source for c in chapters] == ["chap_01.xhtml", "chap_02.xhtml", "chap_03.xhtml"]
    lamp = chapters[1].text
    assert epub_util.FOOTNOTED_TEXT in lamp  # "wick1 twice" would be the marker read
    assert epub_util.FOOTNOTE_BODY not in lamp and "whale" not in lamp
    assert "drawing" not in lamp  # the image's alt text
    info = book.info
    assert (info.title, info.author, info.language, info.format) == (epub_util.TITLE, epub_util.AUTHOR, "en", "epub")
    assert info.cover == tiny_png() and info.cover_type == "image/png"
    assert info.skipped == (
        "cover.xhtml (front matter, guide type cover)",
        "Contents (front matter, guide type toc)",
        "Copyright (front matter, guide type copyright-page)",
    )
    assert len(book) == 3
    assert [r.words for r in book.outline] == [count_words(c.text) for c in chapters]


def test_front_matter_known_by_its_title_alone_is_skipped_and_kept_on_request(tmp_path):
    path = make_epub(tmp_path / "book.epub", matter_types=False, cover=None)
    book = open_book(path)
    assert _outline(book) == [(1, "The Storm"), (2, "The Lamp"), (3, "The Morning")]
    assert book.info.skipped == ("Contents (front matter, by its title)", "Copyright (front matter, by its title)")
    kept = open_book(path, keep_front_matter=True)
    assert _outline(kept) == [(1, "Contents"), (2, "Copyright"), (3, "The Storm"), (4, "The Lamp"), (5, "The Morning")]
    assert next(kept.chapters()).text == "The Storm\n\nThe Lamp\n\nThe Morning"
    assert kept.info.skipped == ()


@pytest.mark.parametrize(
    "options, titles",
    [
        ({}, ["The Storm", "The Lamp", "The Morning"]),  # the TOC's
        ({"toc": False}, ["The Storm", "The Lamp", "The Morning"]),  # no TOC: the first heading
        ({"toc": False, "headings": False}, ["Chapter 1", "Chapter 2", "Chapter 3"]),  # neither
        ({"headings": False}, ["The Storm", "The Lamp", "The Morning"]),
        ({"headings": False, "nav": False}, ["The Storm", "The Lamp", "The Morning"]),  # EPUB 2: the NCX's
    ],
)
def test_epub_chapter_titles_come_from_the_toc_then_the_heading_then_a_number(tmp_path, options, titles):
    book = open_book(make_epub(tmp_path / "book.epub", **options))
    assert [c.title for c in book.chapters()] == titles
    # the heading that is the title is not read twice
    assert all(not c.text.startswith(c.title) for c in book.chapters())


def test_the_toc_title_wins_over_the_heading_and_a_heading_equal_to_it_is_dropped(tmp_path):
    chapters = [("Chapter 1: The Storm", "<p>Wind.</p>")]
    path = make_epub(tmp_path / "b.epub", chapters=chapters, headings=False, with_image=False, footnote=False)
    heading = b"<h1>Chapter 1</h1><h2>The Storm</h2><p>Wind.</p>"
    rewrite(path, "EPUB/chap_01.xhtml", lambda page: page.replace(b"<p>Wind.</p>", heading))
    [chapter] = open_book(path).chapters()
    assert (chapter.title, chapter.text) == ("Chapter 1: The Storm", "Wind.")


@pytest.mark.parametrize(
    "paragraphs, title, kept",
    [
        (["The Storm", "Wind."], "The Storm", ["Wind."]),
        (["THE STORM.", "Wind."], "The Storm", ["Wind."]),
        (["Chapter 1", "The Storm", "Wind."], "Chapter 1: The Storm", ["Wind."]),
        (["The Storm", "Wind."], "1. The Storm", ["Wind."]),
        (["Chapter 1", "Wind."], "Chapter 1: The Storm", ["Chapter 1", "Wind."]),  # not the whole title
        (["The Storm was wild.", "Wind."], "The Storm", ["The Storm was wild.", "Wind."]),
        (["Wind."], None, ["Wind."]),
        (["Storm"], "The Storm", []),
    ],
)
def test_a_heading_that_is_the_title_is_not_read_again(paragraphs, title, kept):
    assert xhtml.drop_title(paragraphs, title) == kept


def test_a_spine_page_the_toc_does_not_name_continues_its_chapter_unless_it_has_a_heading(tmp_path):
    extra = [
        ("chap_03b.xhtml", "", "<p>The rest of the morning.</p>"),  # a split file: no heading
        ("afterword.xhtml", "Afterword", "<h2>Afterword</h2><p>Written at sea.</p>"),
    ]
    book = open_book(make_epub(tmp_path / "b.epub", extra_spine=extra))
    chapters = list(book.chapters())
    assert [(c.title, c.source) for c in chapters][2:] == [
        ("The Morning", "chap_03.xhtml, chap_03b.xhtml"),
        ("Afterword", "afterword.xhtml"),
    ]
    assert chapters[2].text.endswith("Nobody on the shore said a word.\n\nThe rest of the morning.")
    assert chapters[3].text == "Written at sea."


def test_a_book_in_one_file_is_cut_at_the_tocs_anchors_but_not_at_its_sections(tmp_path):
    body = (
        '<h1 id="c1">One</h1><p>First.</p><h2 id="s1">A section</h2><p>Still one.</p>'
        '<h1><a id="c2"></a>Two</h1><p>Second.</p><div id="c3"><h1>Three</h1><p>Third.</p></div>'
    )
    links = [
        ("chap_01.xhtml#c1", "One", [("chap_01.xhtml#s1", "A section")]),  # a section of One: no cut
        ("chap_01.xhtml#c2", "Two"),
        ("chap_01.xhtml#c3", "Three"),
    ]
    path = make_epub(
        tmp_path / "b.epub",
        chapters=[("Book", body)],
        headings=False,
        toc_links=links,
        with_image=False,
        footnote=False,
    )
    chapters = list(open_book(path).chapters())
    assert [(c.title, c.text, c.source) for c in chapters] == [
        ("One", "First.\n\nA section\n\nStill one.", "chap_01.xhtml#c1"),
        ("Two", "Second.", "chap_01.xhtml#c2"),
        ("Three", "Third.", "chap_01.xhtml#c3"),
    ]


def test_parts_in_the_toc_title_their_own_files(tmp_path):
    chapters = [("Part One", ""), ("The Storm", "<p>Wind.</p>"), ("The Calm", "<p>Still.</p>")]
    links = [("chap_01.xhtml", "Part One", [("chap_02.xhtml", "The Storm"), ("chap_03.xhtml", "The Calm")])]
    path = make_epub(tmp_path / "b.epub", chapters=chapters, toc_links=links, with_image=False, footnote=False)
    book = open_book(path)
    assert _outline(book) == [(1, "The Storm"), (2, "The Calm")]
    assert book.info.skipped[-1] == "Part One (no text)"  # only its title


def test_empty_chapters_are_skipped_and_listed_and_the_rest_renumbered(tmp_path):
    chapters = [("One", "<p>First words.</p>"), ("Two", "<p> </p><img src='x.png'/>"), ("Three", "<p>Last.</p>")]
    book = open_book(make_epub(tmp_path / "b.epub", chapters=chapters, with_image=False, footnote=False))
    assert _outline(book) == [(1, "One"), (2, "Three")]
    assert book.info.skipped[-1] == "Two (no text)"


def test_chapters_can_be_read_by_number(tmp_path):
    book = open_book(make_epub(tmp_path / "b.epub"))
    assert [(c.number, c.title) for c in book.chapters({2, 3})] == [(2, "The Lamp"), (3, "The Morning")]


@pytest.mark.parametrize(
    "cover, expected",
    [
        (epub_util.jpeg_head(), "image/jpeg"),
        (tiny_png(), "image/png"),
        (b"GIF89a" + b"\x00" * 32, None),  # not a format an M4B takes: no cover
        (None, None),
    ],
)
def test_the_cover_is_the_cover_items_bytes_typed_by_its_content(tmp_path, cover, expected):
    info = open_book(make_epub(tmp_path / "b.epub", cover=cover)).info
    assert info.cover_type == expected
    assert info.cover == (cover if expected else None)


def test_without_a_cover_item_the_cover_is_the_image_on_the_cover_page(tmp_path):
    path = make_epub(tmp_path / "b.epub")
    rewrite(
        path,
        "EPUB/content.opf",
        lambda opf: opf.replace(b' properties="cover-image"', b"").replace(b'name="cover"', b'name="x"'),
    )
    assert b"cover-image" not in zipfile.ZipFile(path).read("EPUB/content.opf")
    assert open_book(path).info.cover == tiny_png()


def test_a_font_obfuscated_epub_is_not_drm_and_reads(tmp_path):
    book = open_book(make_epub(tmp_path / "b.epub", obfuscated_font=True))
    assert len(book) == 3


def _zip(path: Path, files: dict[str, str | bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


CONTAINER = (
    '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
    '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>'
)


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda p: _write(p, b"just some text, not a zip"), "not an EPUB (not a zip file)"),
        (lambda p: _zip(p, {"mimetype": "application/epub+zip"}), "a zip without META-INF/container.xml"),
        (lambda p: _zip(p, {"META-INF/container.xml": "<container/>"}), "names no package (OPF) file"),
        (lambda p: _zip(p, {"META-INF/container.xml": CONTAINER}), "its package file OEBPS/content.opf is missing"),
        (
            lambda p: _zip(p, {"META-INF/container.xml": CONTAINER, "OEBPS/content.opf": "<package"}),
            "not a readable EPUB",
        ),
        (lambda p: make_epub(p, encrypted=True), "DRM-protected (META-INF/encryption.xml encrypts its content)"),
    ],
    ids=["not-a-zip", "no-container", "no-rootfile", "no-opf", "bad-opf", "drm"],
)
def test_a_bad_epub_is_one_line_naming_the_file(tmp_path, make, words):
    path = make(tmp_path / "novel.epub")
    with pytest.raises(InvalidRequest) as e:
        open_book(path)
    message = str(e.value)
    assert words in message and str(path) in message and "\n" not in message


def test_a_file_of_the_zip_too_large_unpacked_is_refused(tmp_path, monkeypatch):
    path = make_epub(tmp_path / "b.epub", cover=None)
    monkeypatch.setattr(epubzip, "MAX_MEMBER_BYTES", 300)
    with pytest.raises(
        InvalidRequest,
        match=r"b\.epub: EPUB/contents\.xhtml unpacks to over 300 bytes, more than a document of a book may be",
    ):
        open_book(path)


def test_without_ebooklib_an_epub_asks_for_the_book_extra(tmp_path, monkeypatch):
    path = make_epub(tmp_path / "b.epub")
    monkeypatch.setitem(sys.modules, "ebooklib", None)
    monkeypatch.setitem(sys.modules, "ebooklib.epub", None)
    with pytest.raises(MissingExtra) as e:
        open_book(path)
    assert "pip install 'omnivoice-cli[book]'" in str(e.value) and str(path) in str(e.value)


def test_markdown_and_text_need_no_ebooklib(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ebooklib", None)
    monkeypatch.setitem(sys.modules, "lxml", None)
    (tmp_path / "a.md").write_text("# One\n\nWords.\n")
    (tmp_path / "a.txt").write_text("Words.\n")
    assert _outline(open_book(tmp_path / "a.md")) == [(1, "One")]
    assert _outline(open_book(tmp_path / "a.txt")) == [(1, "a")]


# The XHTML reading rule: (body, paragraphs).
XHTML_CASES = [
    ("<p>One.</p><p>Two.</p>", ["One.", "Two."]),
    ("<div>A<br/>B</div><ul><li>x</li><li>y</li></ul>", ["A", "B", "x", "y"]),
    ("<h2>Head</h2>Loose text<p>P</p>", ["Head", "Loose text", "P"]),
    ("<p>Sp<em>lit</em> w<b>or</b>d</p>", ["Split word"]),
    ("<p>a\n   b\u00a0\u00a0c</p>", ["a b c"]),
    ("<script>var x=1;</script><style>p{}</style><p>Kept</p>", ["Kept"]),
    ('<p>See<img src="i.png" alt="An image"/> this.</p>', ["See this."]),
    ("<p>Word<sup>12</sup> and<sup>*</sup> more</p>", ["Word and more"]),  # footnote markers
    ("<p>The 10<sup>th</sup> day, x<sub>2</sub></p>", ["The 10th day, x2"]),  # not markers
    ('<p>Ref<sup><a href="#n1">a</a></sup>.</p>', ["Ref."]),
    ('<p>Ref<a href="notes.xhtml#n3">[3]</a>.</p>', ["Ref."]),
    ('<p>See <a href="#ch2">chapter two</a>.</p>', ["See chapter two."]),  # a link with words is read
    ('<p>Ref<a epub:type="noteref" href="#n">note</a>.</p>', ["Ref."]),
    ('<p>Text.</p><aside epub:type="footnote"><p>Note body.</p></aside>', ["Text."]),
    ('<p>Text.</p><section epub:type="endnotes"><p>1. Note.</p></section>', ["Text."]),
    ('<p>Text.</p><div role="doc-endnotes"><p>Note.</p></div>', ["Text."]),
    ('<p>Text.</p><div class="footnotes"><p>Note.</p></div>', ["Text."]),
    ('<p>One<span epub:type="pagebreak" title="12">12</span> two</p>', ["One two"]),
    ('<p hidden="hidden">Hidden.</p><p style="display: none">Gone.</p><p>Seen.</p>', ["Seen."]),
    ("<p>It&rsquo;s &mdash; fine&nbsp;now &amp; then</p>", ["It\u2019s \u2014 fine now & then"]),
    ("<pre>line one\nline two</pre>", ["line one", "line two"]),
    ("<p><ruby>漢<rt>かん</rt>字<rt>じ</rt></ruby></p>", ["漢字"]),
    ("<table><tr><td>a</td><td>b</td></tr><tr><td>c</td></tr></table>", ["a b", "c"]),
    ("<p>soft\u00adhyphen zero\u200bwidth</p>", ["softhyphen zerowidth"]),
]


@pytest.mark.parametrize("body, paragraphs", XHTML_CASES)
def test_xhtml_reading_rule(body, paragraphs):
    page = (
        '<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml" '
        f'xmlns:epub="http://www.idpf.org/2007/ops"><head><title>T</title></head><body>{body}</body></html>'
    )
    assert xhtml.read_doc(page.encode()).paragraphs == paragraphs


def test_xhtml_that_is_not_well_formed_is_read_as_html():
    doc = xhtml.read_doc(b"<html><body><h1>Title<p>One &copy; two<p>Three<br>Four</body></html>")
    assert doc.paragraphs == ["Title", "One \u00a9 two", "Three", "Four"]
    assert doc.heading == "Title"


# ---------------------------------------------------------------------------------- matter titles


@pytest.mark.parametrize(
    "title, what",
    [
        ("Contents", "table of contents"),
        ("TABLE OF CONTENTS", "table of contents"),
        ("Copyright", "copyright page"),
        ("Copyright.", "copyright page"),
        ("Index", "index"),
        ("Also by Ada Quill", "advertisement"),
        ("Title Page", "title page"),
        ("Dedication", None),  # read, as audiobooks do
        ("Acknowledgments", None),
        ("Notes from Underground", None),  # whole titles only
        ("The Index Card", None),
        ("Chapter 1", None),
    ],
)
def test_front_and_back_matter_titles(title, what):
    assert matter_by_title(title) == what


# ----------------------------------------------------------------------------------------- Markdown

# (Markdown, [(title, text)], skipped)
MARKDOWN_CASES = [
    ("# One\n\nA.\n\n# Two\n\nB.\n", [("One", "A."), ("Two", "B.")], ()),
    ("Intro words.\n\n# One\n\nA.\n", [("notes", "Intro words."), ("One", "A.")], ()),  # before: the file's name
    ("\n\n# One\n\nA.\n", [("One", "A.")], ()),  # a blank start is no chapter
    ("No headings at all.\n\nTwo paragraphs.\n", [("notes", "No headings at all.\n\nTwo paragraphs.")], ()),
    # ## under # is a chapter of its own; the # chapter holds only the text before it
    ("# Part\n\nP.\n\n## Ch 1\n\nA.\n\n## Ch 2\n\nB.\n", [("Part", "P."), ("Ch 1", "A."), ("Ch 2", "B.")], ()),
    ("# Part\n\n## Ch 1\n\nA.\n", [("Ch 1", "A.")], ("Part (no text)",)),
    ("# One\n\n### Sub\n\nA.\n", [("One", "Sub.\n\nA.")], ()),  # ### is read in its chapter
    ("One\n===\n\nA.\n\nTwo\n---\n\nB.\n", [("One", "A."), ("Two", "B.")], ()),  # setext headings
    ("# One\n\n```\n# not a heading\n```\n\nA.\n", [("One", "A.")], ()),  # code: no heading, not read
    ("# One\n\n> # quoted\n\n- # listed\n", [("One", "quoted.\n\nlisted.")], ()),
    ("# *Emph* `code`\n\nA.\n", [("Emph code", "A.")], ()),
    ("# One\n\nPara one\ncontinues.\n\n- x\n- y\n", [("One", "Para one continues.\n\nx.\n\ny.")], ()),
    ("# One\n\nSee [the site][s].\n\n[s]: http://example.com\n", [("One", "See the site.")], ()),
    ("# Contents\n\n- One\n\n# One\n\nA.\n", [("One", "A.")], ("Contents (front matter, by its title)",)),
    ("---\ntitle: Notes\nauthor: Bo\n---\n# One\n\nA.\n", [("One", "A.")], ()),  # front matter: metadata
]


@pytest.mark.parametrize("source, chapters, skipped", MARKDOWN_CASES)
def test_markdown_chaptering(tmp_path, source, chapters, skipped):
    path = tmp_path / "notes.md"
    path.write_text(source, encoding="utf-8")
    book = open_book(path)
    assert [(c.title, c.text) for c in book.chapters()] == chapters
    assert book.info.skipped == skipped
    assert [c.number for c in book.chapters()] == list(range(1, len(chapters) + 1))


def test_markdown_metadata_and_sources(tmp_path):
    path = tmp_path / "notes.md"
    path.write_text("---\ntitle: My Notes\nauthor: 'Bo Li'\nlang: fr\n---\nIntro.\n\n## Next\n\nA.\n", encoding="utf-8")
    book = open_book(path)
    assert (book.info.title, book.info.author, book.info.language, book.info.format) == (
        "My Notes",
        "Bo Li",
        "fr",
        "markdown",
    )
    assert [c.source for c in book.chapters()] == ["notes.md line 6", "notes.md line 8"]


def test_markdown_reads_as_say_markdown_does(tmp_path):
    from omnivoice_cli.engine.text.markup import markdown_to_text

    block = "Some **bold** and a [link](http://x) and ![alt](i.png) and `code`."
    (tmp_path / "a.md").write_text(f"# T\n\n{block}\n")
    [chapter] = open_book(tmp_path / "a.md").chapters()
    assert chapter.text == markdown_to_text(block)


# --------------------------------------------------------------------------------------- plain text


@pytest.mark.parametrize(
    "line, heading",
    [
        ("Chapter 12", ("Chapter 12", False)),
        ("CHAPTER XII", ("CHAPTER XII", False)),
        ("CHAPTER XII.", ("CHAPTER XII", False)),
        ("  Chapter 12  ", ("Chapter 12", False)),
        ("Chapter Twelve", ("Chapter Twelve", False)),
        ("Chapter twenty-one", ("Chapter twenty-one", False)),
        ("Chapter 3: The Storm", ("Chapter 3: The Storm", True)),
        ("CHAPTER I. LOOMINGS.", ("CHAPTER I: LOOMINGS", True)),
        ("Chapter 4 \u2014 Home", ("Chapter 4: Home", True)),
        ("Part II", ("Part II", False)),
        ("Book One", ("Book One", False)),
        ("Prologue", ("Prologue", False)),
        ("Epilogue: After", ("Epilogue: After", True)),
        ("Chapter 12 was where it all went wrong.", None),
        ("Chapter 12, in which nothing happens", None),
        ("Chapter 3: and then, after that, we all went down to the sea to look at it again", None),
        ("Chapter", None),
        ("Chapter IIII", None),  # not a Roman numeral
        ("Chapters 1 and 2", None),
        ("The chapter 3", None),
        ("Particularly II", None),
        ("Prologues are long", None),
    ],
)
def test_plain_text_heading_lines(line, heading):
    assert text_heading(line) == heading


TEXT_CASES = [
    ("Just text.\n\nMore.\n", [("book", "Just text.\n\nMore.")], ()),
    (
        "Title\n\nChapter 1\n\nA b\nc.\n\nD.\n\nChapter 2\n\nE.\n",
        [("book", "Title"), ("Chapter 1", "A b c.\n\nD."), ("Chapter 2", "E.")],
        (),
    ),
    ("CHAPTER I.\nDown the Rabbit-Hole\n\nAlice.\n", [("CHAPTER I: Down the Rabbit-Hole", "Alice.")], ()),
    # not alone on its line: text
    ("Chapter 1\n\nIt said\nChapter 2\nin the margin.\n", [("Chapter 1", "It said Chapter 2 in the margin.")], ()),
    (
        "Chapter 1\n\nA.\n\nChapter 12 was where it all went wrong.\n",
        [("Chapter 1", "A.\n\nChapter 12 was where it all went wrong.")],
        (),
    ),
    # a contents list: lines that do not stand alone are text
    (
        "CONTENTS\n\nChapter 1. One\nChapter 2. Two\n\nChapter 1. One\n\nA.\n",
        [("book", "CONTENTS\n\nChapter 1. One Chapter 2. Two"), ("Chapter 1: One", "A.")],
        (),
    ),
    ("Part One\n\nChapter 1\n\nA.\n", [("Chapter 1", "A.")], ("Part One (no text)",)),
    ("Chapter 1\n\nA.\n\nChapter 2\n", [("Chapter 1", "A.")], ("Chapter 2 (no text)",)),
    ("Chapter 1\r\n\r\nA.\r\nB.\r\n", [("Chapter 1", "A. B.")], ()),
    ("\ufeffChapter 1\n\nA.\n", [("Chapter 1", "A.")], ()),
    (
        "Header\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\n\nChapter 1\n\nA.\n\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\nLicence.\n",
        [("Chapter 1", "A.")],
        (
            "Project Gutenberg header (front matter, before line 2)",
            "Project Gutenberg licence (back matter, from line 8)",
        ),
    ),
]


@pytest.mark.parametrize("source, chapters, skipped", TEXT_CASES)
def test_plain_text_chaptering(tmp_path, source, chapters, skipped):
    path = tmp_path / "book.txt"
    path.write_bytes(source.encode("utf-8"))
    book = open_book(path)
    assert [(c.title, c.text) for c in book.chapters()] == chapters
    assert book.info.skipped == skipped


def test_plain_text_sources_and_keep_front_matter(tmp_path):
    path = tmp_path / "book.txt"
    path.write_text("Front.\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\n\nChapter 1\n\nA.\n")
    assert [c.source for c in open_book(path).chapters()] == ["book.txt line 4"]
    kept = open_book(path, keep_front_matter=True)
    assert [c.title for c in kept.chapters()] == ["book", "Chapter 1"]


@pytest.mark.parametrize(
    "data, words",
    [
        (b"Good line.\nBad \xff byte.\n", "not UTF-8 text: line 2 has the byte 0xff"),
        ("Chapter 1\n\nA.\n".encode("utf-16"), "not UTF-8 text (it is UTF-16)"),
    ],
)
def test_text_that_is_not_utf8_is_one_clear_line(tmp_path, data, words):
    for name in ("book.txt", "book.md"):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(InvalidRequest) as e:
            open_book(tmp_path / name)
        assert words in str(e.value) and name in str(e.value) and "save it as UTF-8" in str(e.value)


def test_a_missing_file_or_a_folder_is_one_line(tmp_path):
    with pytest.raises(InvalidRequest, match="no such file"):
        open_book(tmp_path / "nope.epub")
    with pytest.raises(InvalidRequest, match="a folder"):
        open_book(tmp_path)


@pytest.mark.parametrize(
    "text, n",
    [
        ("", 0),
        ("one two  three", 3),
        ("It's a well-known fact -- 42 * 7.", 6),
        ("\u4eca\u5929\u5929\u6c14\u5f88\u597d", 6),  # Chinese: a word a character
        ("Hello \u4e16\u754c!", 3),
        ("\u2014 \u2026 ...", 0),
    ],
)
def test_count_words(text, n):
    assert count_words(text) == n


# ----------------------------------------------------------------------------------- bounded memory

MEMORY_PROBE = textwrap.dedent(
    """
    import resource, sys

    def peak_mib():
        # the process's own peak RSS: VmHWM belongs to this program's memory, where
        # getrusage's ru_maxrss also counts what the parent held when it started us (Linux
        # carries it over fork and exec)
        try:
            with open("/proc/self/status") as f:
                return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) // 1024
        except OSError:
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024

    from omnivoice_cli.app.book.bookread.chapters import count_words
    from omnivoice_cli.app.book.bookread.open import open_book
    before = peak_mib()
    book = open_book(sys.argv[1])
    words = sum(count_words(c.text) for c in book.chapters())
    print(len(book), words, before, peak_mib(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
    """
)


def _dry_run_memory(path: Path) -> tuple[int, int, int, int]:
    """(chapters, words, RSS in MiB before opening, peak RSS in MiB): a dry run in a fresh process."""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE, str(path)], capture_output=True, text=True, env=env, timeout=600
    )
    assert out.returncode == 0, out.stderr
    chapters, words, before, peak, _ = map(int, out.stdout.split())
    return chapters, words, before, peak


PARAGRAPH = "The sea was calm that night and the keeper wrote in his log until the lamp burned low. "


@pytest.mark.slow
def test_a_50_mb_text_book_is_read_in_bounded_memory(tmp_path):
    path = tmp_path / "big.txt"
    chapter_body = "\n".join(textwrap.wrap(PARAGRAPH * 12, 72)) + "\n\n"
    with open(path, "w", encoding="utf-8") as f:
        n = 0
        while f.tell() < 50 * 1024 * 1024:
            n += 1
            f.write(f"Chapter {n}\n\n" + chapter_body * 100)
    chapters, words, before, peak = _dry_run_memory(path)
    assert chapters == n
    assert words == n * 100 * count_words(PARAGRAPH * 12)
    assert peak < 300  # the bound
    assert peak - before < 40  # streamed: reading the 50 MB whole would take more than that


@pytest.mark.slow
def test_a_large_epub_is_read_in_bounded_memory(tmp_path):
    body = "".join(f"<p>{PARAGRAPH * 6}</p>" for _ in range(450))  # about 250 kB a chapter
    chapters = [(f"Chapter {i}", body) for i in range(1, 201)]  # about 50 MB of XHTML
    path = make_epub(tmp_path / "big.epub", chapters=chapters, with_image=False, footnote=False)
    n, words, before, peak = _dry_run_memory(path)
    assert n == 200
    assert words == 200 * 450 * count_words(PARAGRAPH * 6)
    assert peak < 300
    assert peak - before < 40  # one chapter at a time, not the whole book
