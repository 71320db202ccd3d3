"""Plain-text sources: fortune cookies and Perl's POD documentation.

  fortunes  the fortune-mod data files (packages fortunes-min, fortunes):
            one document per fortune
  perl      the Perl 5.36 manual pages in POD (/usr/share/perl/5.36.0/pod,
            package perl-doc): prose paragraphs, split at =head1/=head2
"""
import glob
import os
import re

from sources_common import Doc, is_prose, pack, sentence, unwrap

FORTUNES_DIR = "/usr/share/games/fortunes"
# ascii-art: pictures; translate-me: mostly Latin.
FORTUNES_SKIPPED = ("ascii-art", "translate-me")


def fortune_files(log):
    """The fortune data files (not the .dat indexes, not the .u8 links),
    sorted, without FORTUNES_SKIPPED; none is an offensive (fortunes-off) set."""
    paths = sorted(p for p in glob.glob(os.path.join(FORTUNES_DIR, "*"))
                   if os.path.isfile(p) and not os.path.islink(p) and "." not in os.path.basename(p)
                   and os.path.basename(p) not in FORTUNES_SKIPPED)
    if not paths:
        log.setdefault("missing", []).append(f"{FORTUNES_DIR} (fortunes not installed; source skipped)")
    return paths


def fortunes_documents(log):
    """One Doc per fortune (the text between lines holding only "%"), its
    lines joined; the attribution ("-- Author") kept as the last words. The
    files are UTF-8 (a file that is not is read as latin-1 and counted in
    log["fortunes_latin1_files"]). Fortunes that are not prose (pictures,
    tables) are dropped (log["fortunes_not_prose"])."""
    paths = fortune_files(log)
    log["fortunes_files"] = [os.path.basename(p) for p in paths]
    for path in paths:
        raw = open(path, "rb").read()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("latin-1")
            log["fortunes_latin1_files"] = log.get("fortunes_latin1_files", 0) + 1
        for fortune in re.split(r"^%[ \t]*$", text, flags=re.M):
            joined = unwrap(fortune.split("\n"))
            if not joined:
                continue
            if not is_prose(joined, min_words=1):
                log["fortunes_not_prose"] = log.get("fortunes_not_prose", 0) + 1
                continue
            yield Doc([joined])


# --- POD ------------------------------------------------------------------------
PERL_POD_DIR = "/usr/share/perl/5.36.0/pod"
# Change logs (perl*delta, perlhist), the table of contents, licences, property
# tables and the Chinese/Japanese/Korean/Taiwanese introductions.
PERL_SKIPPED = re.compile(r"^perl(\d+delta|delta|hist|toc|gpl|artistic|uniprops|cn|jp|ko|tw)\.pod$")
_POD_ENTITIES = {"lt": "<", "gt": ">", "verbar": "|", "sol": "/", "quot": '"', "amp": "&",
                 "apos": "'", "nbsp": " "}


def pod_inline(text):
    """Plain text of POD formatting codes: B<x> I<x> C<x> F<x> S<x> -> x,
    L<text|target> -> text, L<name/"section"> -> section in name, E<lt> -> <,
    X<...> and Z<> removed; the C<< x >> forms first, then single-bracket
    codes from the innermost out."""
    for k in range(4, 1, -1):
        text = re.sub(r"([A-Z])%s\s+(.+?)\s+%s" % ("<" * k, ">" * k),
                      lambda m: _pod_code(m.group(1), m.group(2)), text, flags=re.S)
    single = re.compile(r"([A-Z])<([^<>]*)>")
    while True:
        new = single.sub(lambda m: _pod_code(m.group(1), m.group(2)), text)
        if new == text:
            return text
        text = new


def _pod_code(code, inner):
    if code in ("X", "Z"):
        return ""
    if code == "E":
        if inner.isdigit():
            return chr(int(inner))
        if inner.lower().startswith("0x"):
            return chr(int(inner, 16))
        return _POD_ENTITIES.get(inner, "")
    if code == "L":
        if "|" in inner:
            return inner.split("|", 1)[0]
        if re.match(r"\w+://", inner):
            return inner
        name, _, section = inner.partition("/")
        section = section.strip('"')
        return f"{section} in {name}" if name and section else (section or name)
    return inner


def pod_sections(text):
    """[(title, [paragraph])] of a POD document: =head1/=head2 start a
    section, =head3/=head4 and =item texts become paragraphs; verbatim
    (indented) paragraphs, =begin/=end and =for blocks and other commands are
    skipped; ordinary paragraphs are unwrapped and their codes resolved."""
    sections, skipping = [["", []]], False
    for para in re.split(r"\n(?:[ \t]*\n)+", text.replace("\r", "")):
        para = para.strip("\n")
        if not para.strip():
            continue
        command = re.match(r"=(\w+)\s*(.*)", para, re.S)
        if command:
            name, rest = command.group(1), pod_inline(unwrap(command.group(2).split("\n"))).strip()
            if name == "begin":
                skipping = True
            elif name == "end":
                skipping = False
            elif skipping:
                continue
            elif name in ("head1", "head2"):
                sections.append([rest, []])
            elif name in ("head3", "head4", "item") and not re.fullmatch(r"[*-]|\d+\.?|", rest):
                sections[-1][1].append(rest)
        elif not skipping and para[0] not in " \t":
            sections[-1][1].append(pod_inline(unwrap(para.split("\n"))))
    return [(t, ps) for t, ps in sections if ps]


def perl_documents(log):
    """Docs of the Perl manual (POD), PERL_SKIPPED left out: prose paragraphs
    (is_prose, min. 4 words) given a final period if needed; each page packed
    into documents of at most MAX_DOC_WORDS words split at =head1/=head2
    sections."""
    paths = sorted(p for p in glob.glob(os.path.join(PERL_POD_DIR, "*.pod"))
                   if not PERL_SKIPPED.match(os.path.basename(p)))
    if not paths:
        log.setdefault("missing", []).append(f"{PERL_POD_DIR} (perl-doc not installed; source skipped)")
        return
    log["perl_pages"] = len(paths)
    for path in paths:
        text = open(path, encoding="utf-8", errors="replace").read()
        sections = []
        for title, paragraphs in pod_sections(text):
            kept = [sentence(p) for p in paragraphs if is_prose(p, min_words=4)]
            log["perl_not_prose"] = log.get("perl_not_prose", 0) + len(paragraphs) - len(kept)
            sections.append((title, kept))
        for prefix, parts in pack(sections):
            yield Doc(parts, prefix)
