"""What every corpus source yields, and the text helpers they share.

A source is a generator of Doc records. build_corpus.py cleans them, drops
the parts that overlap evaluation data, and joins what is left into one line:
    prefix + " " + " ".join(kept parts)
A document whose `parts` is one string is all-or-nothing; a dictionary entry
or a page section lists its senses or paragraphs as separate parts so that one
offending sense or paragraph can be dropped while the rest is kept.
"""
import collections

MAX_DOC_WORDS = 3000   # longer pages are split at section/paragraph boundaries

Doc = collections.namedtuple("Doc", "parts prefix excluded", defaults=("", False))
Doc.__doc__ = """parts: [str] (droppable units, in order); prefix: str kept in
front of the parts (a headword or section title, "" if none); excluded: the
record is one an evaluation example was made from (drop it whole)."""


def unwrap(lines):
    """Joins hard-wrapped lines into one line (a word broken by a hyphen at a
    line end keeps its hyphen: dictionaries break only at existing hyphens)."""
    return " ".join(" ".join(line.split()) for line in lines if line.strip()).strip()


def blocks(text):
    """Paragraphs of a plain text: lists of lines separated by blank lines."""
    out, cur = [], []
    for line in text.split("\n"):
        if line.strip():
            cur.append(line.rstrip())
        elif cur:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def indent(line):
    return len(line) - len(line.lstrip())


_CODE_CHARS = set("{}<>=_$\\|#@^~`*[]")


def is_prose(text, min_words=3):
    """True for running text: at least `min_words` words, at least 70% of
    the non-space characters letters, under 3% code-like symbols
    ({}<>=_$\\|#@^~`*[]) and no word of over 40 characters (URLs, hashes)."""
    ws = text.split()
    if len(ws) < min_words or max(len(w) for w in ws) > 40:
        return False
    chars = [c for c in text if not c.isspace()]
    letters = sum(1 for c in chars if c.isalpha())
    code = sum(1 for c in chars if c in _CODE_CHARS)
    return letters >= 0.7 * len(chars) and code <= 0.03 * len(chars)


def sentence(text):
    """`text` ending in sentence punctuation (a period added if needed)."""
    text = text.strip()
    if not text:
        return text
    return text if text[-1] in ".:!?;\"'\u201d)" else text + "."


def pack(sections, max_words=MAX_DOC_WORDS):
    """Documents of at most `max_words` words from a page given as
    [(title, [paragraphs])]: a page that fits is one document; otherwise
    consecutive sections are packed together (each title becomes a paragraph
    of its own) and a section longer than max_words is split between
    paragraphs, never inside one. Returns [(prefix, [parts])]."""
    def n(text):
        return len(text.split())

    total = sum(n(t) + sum(n(p) for p in ps) for t, ps in sections)
    units = []  # (is_title, text)
    for title, paragraphs in sections:
        if paragraphs:
            if title:
                units.append((True, sentence(title)))
            units.extend((False, p) for p in paragraphs)
    if not units:
        return []
    if total <= max_words:
        docs = [[u for u in units]]
    else:
        docs, cur, words = [], [], 0
        for i, (is_title, text) in enumerate(units):
            # A title starts a new document when the current one is over half full.
            if cur and (words + n(text) > max_words or (is_title and words > max_words // 2)):
                docs.append(cur)
                cur, words = [], 0
            cur.append((is_title, text))
            words += n(text)
        if cur:
            docs.append(cur)
    out = []
    for d in docs:
        # Drop titles with nothing after them (the next document starts there).
        while d and d[-1][0]:
            d.pop()
        if not d:
            continue
        prefix = d[0][1] if d[0][0] else ""
        parts = [text for _, text in (d[1:] if prefix else d)]
        if parts:
            out.append((prefix, parts))
    return out
