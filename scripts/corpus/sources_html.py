"""Documentation pages: HTML (DocBook, Sphinx, LibreOffice help) and Mallard.

One parser (page_sections) turns a page into sections of prose paragraphs,
following a per-source PageSpec (where the content is, what to skip); one
helper (page_documents) turns a source's pages into Docs: a page of up to
MAX_DOC_WORDS words is one document, a longer one is split between sections
(pack()). Paragraphs that are not prose (is_prose) or that already occurred in
an earlier page of the same source (navigation, boilerplate, chunked copies)
are dropped.
  gnome-help   GNOME Help and the GNOME system administration guide
               (/usr/share/help/C/*/*.page, Mallard; package gnome-user-docs)
  libreoffice  LibreOffice 7.4 help, en-US (libreoffice-help-en-us)
  handbook     The Debian Administrator's Handbook, en-US (debian-handbook)
  dref         Debian Reference, English (debian-reference-en)
  python       Python 3.11 documentation (python3.11-doc)
  postgresql   PostgreSQL 15 documentation (postgresql-doc-15)
"""
import collections
import glob
import re
from html.parser import HTMLParser

from sources_common import Doc, is_prose, pack, sentence

PageSpec = collections.namedtuple(
    "PageSpec", "root skip_tags skip_classes para_tags para_classes heading", defaults=(None,))
PageSpec.__doc__ = """root: (tag, attribute, value) of the element holding the
content (None: the whole page); skip_tags / skip_classes: elements whose
content is ignored; para_tags / para_classes: elements whose text is a
paragraph; heading: function(tag, parent tag) -> True for a section title."""

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
        "source", "track", "wbr"}
INLINE = {"a", "abbr", "acronym", "b", "big", "cite", "code", "em", "font", "i", "kbd", "q",
          "s", "samp", "small", "span", "strong", "sub", "sup", "tt", "u", "var", "mark",
          "time", "dfn", "bdi", "bdo",
          # Mallard inline elements (its <code> inside a <p> is inline too)
          "gui", "guiseq", "key", "keyseq", "link", "app", "cmd", "file", "sys", "output",
          "media", "hi", "ui:expander"}
SKIP_ALWAYS = {"script", "style", "head", "pre", "nav", "header", "footer", "aside", "noscript",
               "svg", "math", "form", "button", "select", "textarea", "template"}


def _html_heading(tag, parent):
    return tag in ("h1", "h2", "h3")


def _mallard_heading(tag, parent):
    return tag == "title" and parent in ("page", "section")


class _PageParser(HTMLParser):
    def __init__(self, spec):
        super().__init__(convert_charrefs=True)
        self.spec = spec
        self.stack = []            # [(tag, kind)]; kind: skip/heading/para/block/inline/root
        self.sections = [["", []]]
        self.buf = []
        self.in_root = 0 if spec.root else 1
        self.skipping = 0

    def _kind(self, tag, attrs):
        spec, a = self.spec, dict(attrs)
        classes = set((a.get("class") or "").split())
        parent = next((t for t, k in reversed(self.stack) if k != "inline"), "")
        if tag in SKIP_ALWAYS or tag in spec.skip_tags or classes & spec.skip_classes:
            return "skip"
        if spec.root and (tag, spec.root[1], spec.root[2]) == (spec.root[0], spec.root[1],
                                                              a.get(spec.root[1])):
            return "root"
        if (spec.heading or _html_heading)(tag, parent):
            return "heading"
        if tag in spec.para_tags or classes & spec.para_classes:
            return "para"
        return "inline" if tag in INLINE else "block"

    def _target(self):
        return next((k for _, k in reversed(self.stack) if k != "inline"), None)

    def _flush(self):
        text = " ".join("".join(self.buf).split())
        self.buf = []
        if not text:
            return
        if self._target() == "heading":
            title = re.sub(r"^(?:(?:Chapter|Appendix|Part)\s+)?[0-9IVXA-Z]{1,4}(?:\.[0-9]+)*\.?\s+", "",
                           text).rstrip("¶ ").strip()
            self.sections.append([title, []])
        else:
            self.sections[-1][1].append(text)

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            if tag == "br":
                self.buf.append(" ")
            return
        kind = self._kind(tag, attrs)
        if kind != "inline" and not self.skipping:
            self._flush()
        self.stack.append((tag, kind))
        self.skipping += kind == "skip"
        self.in_root += kind == "root"

    def handle_startendtag(self, tag, attrs):
        if tag == "br":
            self.buf.append(" ")

    def handle_endtag(self, tag):
        if not any(t == tag for t, _ in self.stack):
            return
        while self.stack:
            t, kind = self.stack[-1]
            if kind != "inline" and not self.skipping:
                self._flush()
            self.stack.pop()
            self.skipping -= kind == "skip"
            self.in_root -= kind == "root"
            if t == tag:
                break

    def handle_data(self, data):
        if self.in_root and not self.skipping and self._target() in ("para", "heading"):
            self.buf.append(data)


def page_sections(text, spec):
    """[(title, [paragraph])] of one page: the text of every paragraph
    element inside the spec's root, outside skipped elements, whitespace
    collapsed; a heading starts a new section (numbering like "6.1.2." and
    "Chapter 6." removed from titles)."""
    p = _PageParser(spec)
    p.feed(text)
    p.close()
    p._flush()
    return [(t, ps) for t, ps in p.sections if ps]


def page_documents(name, paths, spec, log, read=None):
    """Docs of the pages `paths` (in the given order) of source `name`:
    prose paragraphs only (is_prose, min. 4 words), each paragraph at most
    once per source (first page wins), given a final period when it has no
    sentence punctuation; pages packed into documents of at most MAX_DOC_WORDS
    words, title = prefix. Counts go to log[name + "_pages"/"_not_prose"/
    "_repeated"]."""
    read = read or (lambda p: open(p, encoding="utf-8", errors="replace").read())
    seen = set()
    log[name + "_pages"] = len(paths)
    for path in paths:
        sections = []
        for title, paragraphs in page_sections(read(path), spec):
            kept = []
            for para in paragraphs:
                key = para.lower()
                if not is_prose(para, min_words=4):
                    log[name + "_not_prose"] = log.get(name + "_not_prose", 0) + 1
                elif key in seen:
                    log[name + "_repeated"] = log.get(name + "_repeated", 0) + 1
                else:
                    seen.add(key)
                    kept.append(sentence(para))
            sections.append((title, kept))
        for prefix, parts in pack(sections):
            yield Doc(parts, prefix)


def _files(pattern, log, name, exclude=None):
    paths = sorted(p for p in glob.glob(pattern, recursive=True)
                   if not (exclude and exclude.search(p)))
    if not paths:
        log.setdefault("missing", []).append(f"{name}: no files {pattern} (source skipped)")
    return paths


# --- sources ------------------------------------------------------------------------
MALLARD = PageSpec(root=None, skip_tags={"info", "screen", "synopsis", "media", "comment",
                                          "links", "figure"},
                   skip_classes=set(), para_tags={"p", "item", "title", "desc"}, para_classes=set(),
                   heading=_mallard_heading)


def gnome_help_documents(log):
    """GNOME Help and the system administration guide (Mallard .page files
    of /usr/share/help/C, the English originals): page title, section titles,
    and the text of <p>, <item>, <title> (of lists, tables, notes); <info>
    (credits, link lists), block <code>, <screen>, <synopsis> skipped."""
    paths = _files("/usr/share/help/C/*/*.page", log, "gnome-help")
    return page_documents("gnome-help", paths, MALLARD, log)


LIBREOFFICE = PageSpec(root=("div", "id", "DisplayArea"), skip_tags={"table"},
                       skip_classes={"howtoget", "debug", "relatedtopics", "bug"},
                       para_tags={"p", "li", "dd"}, para_classes=set())


def libreoffice_help_documents(log):
    """LibreOffice help pages (text/**/*.html of the en-US help): the
    content area only (#DisplayArea; no navigation, index, scripts), without
    the "To access this command" menu paths and tables."""
    paths = _files("/usr/share/libreoffice/help/en-US/text/**/*.html", log, "libreoffice")
    return page_documents("libreoffice", paths, LIBREOFFICE, log)


DOCBOOK = PageSpec(root=None, skip_tags=set(),
                   skip_classes={"navheader", "navfooter", "toc", "indexterm", "table",
                                 "informaltable", "refsynopsisdiv", "legalnotice", "list-of-tables",
                                 "list-of-figures", "list-of-examples", "screen", "programlisting",
                                 "synopsis", "funcsynopsis", "cmdsynopsis", "literallayout"},
                   para_tags={"p", "li", "dd"}, para_classes={"para"})


def debian_handbook_documents(log):
    """The Debian Administrator's Handbook (DocBook HTML, en-US): paragraphs,
    list items and definitions; navigation, tables of contents, index terms,
    program listings and data tables skipped."""
    paths = _files("/usr/share/doc/debian-handbook/html/en-US/*.html", log, "handbook")
    return page_documents("handbook", paths, DOCBOOK, log)


def debian_reference_documents(log):
    """Debian Reference (DocBook HTML, English: /usr/share/debian-reference/
    *.en.html), same rules as the handbook (its many package tables skipped)."""
    paths = _files("/usr/share/debian-reference/*.en.html", log, "dref")
    return page_documents("dref", paths, DOCBOOK, log)


def postgresql_documents(log):
    """PostgreSQL 15 documentation (DocBook HTML), same rules as the
    handbook (SQL synopses and tables skipped)."""
    paths = _files("/usr/share/doc/postgresql-doc-15/html/*.html", log, "postgresql")
    return page_documents("postgresql", paths, DOCBOOK, log)


SPHINX = PageSpec(root=("div", "role", "main"), skip_tags={"dt", "table"},
                  skip_classes={"headerlink", "highlight", "sphinxsidebar", "related", "footer",
                                "toctree-wrapper", "admonition-title", "doctest", "productionlist",
                                "sig", "rubric", "contents", "topic"},
                  para_tags={"p", "li", "dd"}, para_classes=set())
_PYTHON_SKIP = re.compile(r"/(genindex[^/]*|search|py-modindex|contents|index|download|bugs|copyright"
                          r"|license|about)\.html$|/_[^/]+/")


def python_documents(log):
    """Python 3.11 documentation (Sphinx HTML): paragraphs, list items and
    definitions of the main content; signatures (<dt>), code, tables,
    sidebars, tables of contents and the index, search, module-index,
    contents, licence and download pages skipped. The What's New essays are
    kept (their changelog, changelog.html.gz, is not read)."""
    paths = _files("/usr/share/doc/python3.11/html/**/*.html", log, "python", _PYTHON_SKIP)
    return page_documents("python", paths, SPHINX, log)
