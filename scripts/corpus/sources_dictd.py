"""Dictionaries in dictd format (/usr/share/dictd/NAME.index + NAME.dict.dz).

One reader (dictd_entries) serves all of them; a per-dictionary function
turns an entry's text into a headword and a list of parts (senses, notes,
quotations), and dictionary_documents() makes one Doc per headword:
    "headword: part part part"
  gcide   GNU Collaborative International Dictionary of English (dict-gcide)
  devil   Ambrose Bierce, The Devil's Dictionary (dict-devil)
  jargon  The Jargon File 4.4.7 (dict-jargon)
  foldoc  Free On-line Dictionary of Computing (dict-foldoc)
"""
import gzip
import os
import re
import unicodedata

from sources_common import Doc, blocks, indent, sentence, unwrap

DICTD_DIR = "/usr/share/dictd"
_B64 = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}


def _b64_number(s):
    n = 0
    for c in s:
        n = n * 64 + _B64[c]
    return n


def dictd_available(name):
    return all(os.path.exists(os.path.join(DICTD_DIR, f"{name}.{ext}")) for ext in ("index", "dict.dz"))


def dictd_entries(name):
    """Texts of the entries of dictd database NAME in file order; an entry
    several index lines point to is read once. The 00-database-* entries
    (dictfmt headers: URL, short name, licence preamble) are skipped. A dict.dz
    file is gzip-compatible; text that is not UTF-8 is read as cp1252."""
    spans, headers = set(), set()
    with open(os.path.join(DICTD_DIR, f"{name}.index"), encoding="utf-8", errors="replace") as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) >= 3:
                span = (_b64_number(fields[1]), _b64_number(fields[2]))
                (headers if re.match(r"00-|00database", fields[0]) else spans).add(span)
    spans -= headers
    with gzip.open(os.path.join(DICTD_DIR, f"{name}.dict.dz")) as f:
        data = f.read()
    for start, length in sorted(spans):
        raw = data[start:start + length]
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            yield raw.decode("cp1252", errors="replace")


def _strip_braces(text):
    """{cross reference} -> cross reference."""
    return text.replace("{", "").replace("}", "")


def _strip_brackets(text):
    """Removes every [...] block, nested ones included; an unmatched '[' or
    ']' is dropped alone."""
    out, depth = [], 0
    for c in text:
        if c == "[":
            depth += 1
        elif c == "]":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(c)
    return "".join(out)


# --- GCIDE ---------------------------------------------------------------------
# GCIDE's ASCII codes for letters and symbols ("[ae]" = æ, "['e]" = é, ...);
# the ones not here occur only in pronunciations and etymologies, which are
# removed anyway.
_GCIDE_CHARS = {
    "ae": "æ", "AE": "Æ", "oe": "œ", "OE": "Œ", "eth": "ð", "thorn": "þ", "ss": "ß",
    "deg": "°", "sect": "§", "root": "√", "pound": "£", "cent": "¢", "para": "¶",
    "frac12": "½", "frac14": "¼", "frac34": "¾", "frac13": "⅓", "frac23": "⅔",
    "times": "×", "divide": "÷", "prime": "′", "dprime": "″", "min": "′", "sec": "″",
    "yogh": "ȝ", "th": "th", "ng": "ng", "imac": "ī", "asl": "", "add": "", "udd": "ü",
    "aum": "ä", "Aum": "Ä", "oum": "ö", "uum": "ü", "ccedil": "ç", "ntil": "ñ",
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "zeta": "ζ",
    "eta": "η", "theta": "θ", "iota": "ι", "kappa": "κ", "lambda": "λ", "mu": "μ",
    "nu": "ν", "xi": "ξ", "omicron": "ο", "pi": "π", "rho": "ρ", "sigma": "σ",
    "tau": "τ", "upsilon": "υ", "phi": "φ", "chi": "χ", "psi": "ψ", "omega": "ω",
    "Alpha": "Α", "Beta": "Β", "Gamma": "Γ", "Delta": "Δ", "Theta": "Θ", "Lambda": "Λ",
    "Pi": "Π", "Sigma": "Σ", "Phi": "Φ", "Psi": "Ψ", "Omega": "Ω",
}
_GCIDE_MARKS = {"'": "\u0301", "`": "\u0300", "^": "\u0302", '"': "\u0308", "~": "\u0303",
                ",": "\u0327", "=": "\u0304", "-": "\u0304", ".": "\u0307", "*": "\u030a"}
_GCIDE_CODE = re.compile(r"\[([A-Za-z]{1,8}|['`^\"~,=.*-][A-Za-z]{1,2}|[A-Za-z]{1,2}[\^])\]")


def _gcide_char(m):
    code = m.group(1)
    if code in _GCIDE_CHARS:
        return _GCIDE_CHARS[code]
    if code[0] in _GCIDE_MARKS:               # ['e] é, [=a] ā, ["o] ö, [,c] ç ...
        return code[1:] + _GCIDE_MARKS[code[0]]
    if code.endswith("^"):                    # [a^] ă (breve)
        return code[:-1] + "\u0306"
    return m.group(0)                         # a word in brackets: "[Obs.]" has a dot; "[R]" stays


# GCIDE labels that start a paragraph. Syn: lists are just word lists (dropped).
_GCIDE_DROP = re.compile(r"^(Syn|Ant|Syn\.|See also)\s*:", re.I)
_GCIDE_LABEL = re.compile(r"^(Note|Usage|Example|Examples)\s*:\s*")
_POS = (r"(?:n|v|t|i|a|adj|adv|prep|conj|interj|pron|pl|sing|imp|p|pr|pp|vb|prop|superl|"
        r"compar|pref|suff|fem|masc|pers|poss|dem|rel|interrog|indef|def|art|obs|sg|inf|"
        r"part|pres|past|n\.\s*pl|abbr|ppr|contr|poet|auxil|aux|ns|sym|syll|obj|subj)(?:\.|(?=[;,]))")
_GCIDE_POS = re.compile(r"^(?:[\s,;&]*(?:" + _POS + r"|prefix|suffix|&))+\s*")
_DOMAIN_LABEL = re.compile(r"^\s*\((?:[A-Z][A-Za-z]*\.?\s*(?:&\s*)?){1,3}\)\s*")
_SENSE_START = re.compile(r"^\s{2,4}(\d{1,2})\.\s")
_PRON_WORD = re.compile(r"\S*\w[*\"`]\w\S*")   # Ab`i*o*ge*net"ic*al*ly: a run-in pronunciation
_SENSE_NUMBER = re.compile(r"^(?:\d+\.\s*)?(?:\([a-z]\)\s*)?")


def _gcide_paragraphs(text):
    """Logical paragraphs (lists of lines) of a GCIDE entry: blank lines and
    the start of the next numbered sense ("   2. ...", numbered 1, 2, 3 ...;
    not a wrapped line that starts with a year) separate them."""
    out, last = [], 0
    for block in blocks(text):
        cur = []
        for line in block:
            m = _SENSE_START.match(line)
            if m and int(m.group(1)) in (1, last + 1):
                last = int(m.group(1))
                if cur:
                    out.append(cur)
                    cur = []
            cur.append(line)
        out.append(cur)
    return out


def gcide_entry(text):
    """(headword, parts) of a GCIDE entry: the pronunciation (\\...\\ and the
    parenthesis after it), the part of speech, every [...] block (etymology,
    inflections, usage labels, source tags like "[1913 Webster]",
    "[WordNet 1.5]", "[PJC]") and domain labels like "(Zool.)" removed; sense
    numbers dropped; "Syn:" lists dropped; "Note:"/"Usage:" labels dropped
    (their text kept); quotations kept with their "--Author" attribution;
    {cross references} as plain words; line wraps undone."""
    text = unicodedata.normalize("NFC", _GCIDE_CODE.sub(_gcide_char, text))
    paragraphs = _gcide_paragraphs(text)
    if not paragraphs:
        return "", []
    header = unwrap(paragraphs[0])
    m = re.match(r"\s*([^\\]+?)\s*\\", header)
    if m:
        headword = m.group(1).rstrip(",; ")
        rest = header[m.start(1):]
        # "Word \pron\, Word2 \pron2\ (pron), ..." : every headword form and pronunciation.
        rest = re.sub(r"^(?:[^\\]*\\[^\\]*\\\s*,?\s*(?:or\s+)?)+", "", rest)
        rest = re.sub(r"^\([^)]*\)", "", rest.lstrip())
    else:
        headword, rest = header, ""
    rest = _strip_brackets(rest)
    rest = _GCIDE_POS.sub("", rest)
    rest = re.sub(r"^[\s,;:.]+", "", rest)
    headword = _strip_braces(_strip_brackets(headword)).replace('"', "").replace("*", "").strip()
    parts = []
    for para in [rest] + [unwrap(p) for p in paragraphs[1:]]:
        if not para or _GCIDE_DROP.match(para):
            continue
        para = _GCIDE_LABEL.sub("", para)
        para = _SENSE_NUMBER.sub("", para)
        para = _strip_brackets(para)
        para = _DOMAIN_LABEL.sub("", para)
        para = _strip_braces(para)
        para = re.sub(r"\\[^\\]*\\", "", para).replace("\\", "")   # run-in forms' pronunciations
        para = re.sub(r"\(\s*\)|\(-[^()\s]*\)", "", _PRON_WORD.sub("", para))   # "()", "(-sēz)"
        para = " ".join(para.split())
        para = re.sub(r"\s+([,;:.])", r"\1", para).strip(" ;,")
        if len(para.split()) >= 2:
            parts.append(sentence(para))
    return headword, parts


# --- The Devil's Dictionary ---------------------------------------------------
_DEVIL_HEAD = re.compile(r"^([A-Z][A-Z0-9 '\-.]*?),\s*(?:(?:n|v|adj|adv|pp|p|t|i|x|pron|prep|"
                         r"conj|interj|pl)\.\s*)*")


_ITALIC = re.compile(r"(?<!\w)_([^_]+)_(?!\w)")


def devil_entry(text):
    """(headword, parts) of a Devil's Dictionary entry "WORD, n.  Text...":
    the definition paragraph and each verse quotation (lines joined; its
    attribution, e.g. "G.J.", kept as the last words); _italics_ marks
    removed."""
    paragraphs = blocks(text)
    if not paragraphs:
        return "", []
    first = unwrap(paragraphs[0])
    m = _DEVIL_HEAD.match(first)
    if not m:
        return "", []
    word = m.group(1).strip()
    headword = word.capitalize() if word.isupper() else word
    parts = [first[m.end():]] + [unwrap(p) for p in paragraphs[1:]]
    parts = [_ITALIC.sub(r"\1", " ".join(p.split())) for p in parts]
    return headword, [p for p in parts if p]


# --- The Jargon File and FOLDOC -------------------------------------------------
_JARGON_LABEL = re.compile(r"^(?:\d+\.\s*)?(?:\[[^\]]{1,40}\]\s*)?(?:\d+\.\s*)?")
_FOLDOC_LABEL = re.compile(r"^(?:\d+\.\s*)?(?:<[^>]{1,40}>\s*)*(?:\d+\.\s*)?")


def _indented_body(paragraphs):
    """The body paragraphs of a Jargon File / FOLDOC entry (those after the
    headword paragraph), without the ones indented deeper than the body's
    normal indentation (code, tables, verse that is not prose)."""
    body = paragraphs[1:]
    if not body:
        return []
    base = min(indent(p[0]) for p in body)
    return [p for p in body if indent(p[0]) <= base]


def jargon_entry(text):
    """(headword, parts) of a Jargon File entry: the headword line; the
    pronunciation/part-of-speech line after it dropped; body paragraphs with
    their leading usage label ("[techspeak]", "[IRC; common]") and sense number
    removed; indented examples dropped; {cross references} as plain words."""
    paragraphs = blocks(text)
    if not paragraphs:
        return "", []
    headword = paragraphs[0][0].strip()
    parts = []
    for p in _indented_body(paragraphs):
        para = _JARGON_LABEL.sub("", _strip_braces(unwrap(p)))
        para = re.sub(r"\s+([,;:.)])", r"\1", para)
        if para:
            parts.append(para)
    return headword, parts


def foldoc_entry(text):
    """(headword, parts) of a FOLDOC entry: body paragraphs with the subject
    tags ("<programming>") and sense numbers removed; the date line
    "(1994-11-08)", bibliography paragraphs "[...]" and bare URL paragraphs
    dropped; {cross references} as plain words, "{text (url)}" as text."""
    paragraphs = blocks(text)
    if not paragraphs:
        return "", []
    headword = paragraphs[0][0].strip()
    parts = []
    for p in _indented_body(paragraphs):
        para = unwrap(p)
        if re.fullmatch(r"\(\d{4}-\d\d-\d\d\)", para) or para.startswith("["):
            continue
        para = re.sub(r"\{([^{}]*?)\s*\((?:https?|ftp|mailto|news|file|[\w.-]+\.html)[^{}]*\)\}", r"\1", para)
        para = _FOLDOC_LABEL.sub("", _strip_braces(para))
        para = re.sub(r"\(?(?:https?|ftp)://\S+", "", para)
        para = re.sub(r"\s+([,;:.)])", r"\1", " ".join(para.split())).strip()
        if len(para.split()) >= 2:
            parts.append(para)
    return headword, parts


# --- documents -------------------------------------------------------------------
DICTIONARIES = {"gcide": gcide_entry, "devil": devil_entry, "jargon": jargon_entry,
                "foldoc": foldoc_entry}


def dictionary_documents(name, log):
    """One Doc per headword of dictd database NAME: consecutive entries with
    the same headword (GCIDE has one per part of speech) are merged.
    prefix = "headword:", parts = the senses, notes and quotations."""
    if not dictd_available(name):
        log.setdefault("missing", []).append(f"{DICTD_DIR}/{name}.dict.dz (source skipped)")
        return
    parse = DICTIONARIES[name]
    head, parts, entries = None, [], 0
    for text in dictd_entries(name):
        entries += 1
        headword, new = parse(text)
        if head is not None and headword.lower() != head.lower():
            yield Doc(parts, f"{head}:")
            parts = []
        head = headword
        parts.extend(new)
    if head is not None:
        yield Doc(parts, f"{head}:")
    log[f"{name}_entries"] = entries
