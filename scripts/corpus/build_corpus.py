#!/usr/bin/env python3
"""Builds the English pretraining corpus from text that Debian ships.

Called by scripts/build-corpus.sh after apt has provided the inputs; run it
directly only when they are already there:
    python3 scripts/corpus/build_corpus.py --out DIR [--sources a,b,...]
        [--cap SOURCE=MB ...] [--no-caps]

Sources (one document per line; see PROVENANCE.md written next to the output
and the modules sources_*.py), in processing order:
  debian      every long package description of the Translation-en indexes of
              component main of every configured suite (bookworm, -updates,
              -security): "Short description. paragraph paragraph ..."
  wordnet     every synset of WordNet 3.0: "lemma, lemma: gloss"
  manpages    the pages of `manpages` (Linux man-pages), rendered with man(1):
              "NAME line. DESCRIPTION paragraphs" per page
  gcide devil jargon
              dictd dictionaries (GCIDE, The Devil's Dictionary, the Jargon
              File): "headword: senses, notes, quotations" per headword
  fortunes    fortune-mod's fortunes, one per document
  gnome-help libreoffice handbook dref
              GNOME Help, LibreOffice help, the Debian Administrator's
              Handbook, Debian Reference: prose paragraphs, one document per
              page (long pages split between sections)
  python postgresql perl foldoc
              technical documentation (Python 3.11, PostgreSQL 15, Perl 5.36
              manuals; FOLDOC): same rules; uncapped by default (general
              prose is still over half of the words: Debian's DFSG-free
              general prose is ~42 MB in all, and the corpus wants every
              token it can get), --cap SOURCE=MB limits a source

Processing: NFC, control characters dropped, whitespace collapsed; documents
of fewer than 5 words dropped; evaluation data (eval_data.py) excluded: the
records the examples of make_real_datasets.py came from (every binary package
of a dataset example's Debian source package, every dataset WordNet synset);
every document equal to an evaluation text (after normalisation); every
document that contains an evaluation text of at least 4 tokens as a token
sequence, or shares an 8-token sequence with an evaluation text of at least 8
tokens (for dictionary entries and pages, the offending sense or paragraph is
dropped and the rest kept; the joined document is checked again); exact
duplicates after normalisation (lowercase, collapsed whitespace) removed,
first occurrence kept (sources in the order above); per source, documents
ordered by the sha256 of their normalised text and kept in that order up to
the source's cap (MB of text, 10^6 bytes); documents ordered by that sha256;
a document goes to heldout.txt when the first 32 bits of sha256("heldout:" +
normalised text) are 0 mod 100 (about 1%), else to train.txt.
"""
import argparse
import collections
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, HERE)
import make_real_datasets as rd  # noqa: E402  (one source of truth for parsing and normalising)
import eval_data  # noqa: E402
import sources_dictd  # noqa: E402
import sources_html  # noqa: E402
import sources_text  # noqa: E402
from sources_common import Doc  # noqa: E402

MIN_WORDS = 5
HELDOUT_MODULUS = 100
SOURCES = ("debian", "wordnet", "manpages", "gcide", "fortunes", "devil", "jargon", "gnome-help",
           "libreoffice", "handbook", "dref", "python", "postgresql", "perl", "foldoc")
# General English prose (the rest is technical: package descriptions, manuals).
GENERAL = ("wordnet", "gcide", "fortunes", "devil", "jargon", "gnome-help", "libreoffice",
           "handbook", "dref")
# MB (10^6 bytes) of cleaned text kept per source by default; absent = no cap.
# None: the default encoder's corpus keeps every source whole (see above).
DEFAULT_CAPS_MB = {}
# Debian packages each source is read from (their versions go to PROVENANCE.md).
PACKAGES = {
    "debian": [], "wordnet": ["wordnet-base"], "manpages": ["manpages", "man-db", "groff-base"],
    "gcide": ["dict-gcide"], "fortunes": ["fortunes-min", "fortunes"], "devil": ["dict-devil"],
    "jargon": ["dict-jargon"], "gnome-help": ["gnome-user-docs"],
    "libreoffice": ["libreoffice-help-en-us"], "handbook": ["debian-handbook"],
    "dref": ["debian-reference-en"], "python": ["python3.11-doc"],
    "postgresql": ["postgresql-doc-15"], "perl": ["perl-doc"], "foldoc": ["dict-foldoc"],
}
DEPENDENCIES_ONLY = {"groff-base"}   # versions recorded, installed with man-db


class EvalIndex:
    """Finds text that overlaps the evaluation texts: contains one of at
    least MIN_CONTAINMENT_TOKENS tokens as a token sequence ("contained"), or
    shares an NGRAM-token sequence with one of at least NGRAM tokens
    ("ngram"). Tokens: rd.match_tokens (lowercased \\w+ and punctuation)."""

    def __init__(self, texts):
        n = eval_data.NGRAM
        self.by_key = collections.defaultdict(set)
        self.ngrams = set()
        self.too_short = 0
        for t in texts:
            toks = rd.match_tokens(t)
            if len(toks) < eval_data.MIN_CONTAINMENT_TOKENS:
                self.too_short += 1
                continue
            self.by_key[tuple(toks[:4])].add(" ".join(toks))
            if len(toks) >= n:
                self.ngrams.update(zip(*(toks[i:] for i in range(n))))

    def check(self, text):
        """None, "contained" or "ngram"."""
        toks = rd.match_tokens(text)
        hits = self.by_key.keys() & set(zip(toks, toks[1:], toks[2:], toks[3:]))
        if hits:
            joined = " " + " ".join(toks) + " "
            if any(" " + seq + " " in joined for key in hits for seq in self.by_key[key]):
                return "contained"
        n = eval_data.NGRAM
        if len(toks) >= n and not self.ngrams.isdisjoint(zip(*(toks[i:] for i in range(n)))):
            return "ngram"
        return None


# --- sources -----------------------------------------------------------------
def debian_documents(excluded_sources, excluded_packages, log):
    """One Doc per Translation-en record (all-or-nothing)."""
    package_source = {}
    for suite in rd.suites():
        path = rd.find_list(suite, "Packages")
        if path:
            for r in rd.deb822(rd.read_list(path)):
                package_source.setdefault(r["Package"], rd.source_of(r))
    excluded = set(excluded_packages) | {p for p, s in package_source.items() if s in excluded_sources}
    log["debian_excluded_binary_packages"] = len(excluded)
    for suite in rd.suites():
        path = rd.find_list(suite, "Translation-en")
        if not path:
            log.setdefault("missing", []).append(f"{suite} main Translation-en")
            continue
        log.setdefault("indexes", []).append((suite, "Translation-en", path))
        for r in rd.deb822(rd.read_list(path)):
            if "Description-en" not in r:
                continue
            yield Doc(rd.debian_document_text(r["Description-en"]), excluded=r["Package"] in excluded)


def debian_example_bodies(packages, eval_norm, min_tokens=8):
    """The long-description parts (text after the short description) of the
    debian_sections examples, as far as they have min_tokens tokens: other
    packages (other source packages of the same project) often repeat them
    under a different short description."""
    bodies = set()
    path = rd.find_list("bookworm", "Translation-en")
    for r in rd.deb822(rd.read_list(path)):
        if r.get("Package") in packages and "Description-en" in r:
            if rd.normalise(rd.debian_dataset_text(r["Description-en"])) in eval_norm:
                body = rd.debian_dataset_body(r["Description-en"])
                if len(rd.match_tokens(body)) >= min_tokens:
                    bodies.add(body)
    return sorted(bodies)


def wordnet_documents(excluded_synsets, log):
    """One Doc per WordNet 3.0 synset (all-or-nothing)."""
    for pos in ("noun", "verb", "adj", "adv"):
        for offset, _lex, lemmas, gloss in rd.wordnet_synsets(pos):
            record_excluded = pos == "noun" and offset in excluded_synsets
            yield Doc(f"{', '.join(lemmas)}: {gloss}", excluded=record_excluded)


_OVERSTRIKE = re.compile(r".\x08")


def render_man(path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAN")}
    env.update({"MANWIDTH": "1000", "LC_ALL": "C.UTF-8", "MAN_DISABLE_SECCOMP": "1"})
    out = subprocess.run(["man", "--nh", "--nj", "-l", path], capture_output=True, env=env,
                         timeout=60).stdout.decode("utf-8", errors="replace")
    return _OVERSTRIKE.sub("", out)


def man_document(rendered):
    """NAME line + DESCRIPTION paragraphs (subsection headings dropped), as
    a list of paragraphs."""
    sections, name = collections.defaultdict(list), None
    block = []
    for line in rendered.split("\n") + [""]:
        if line and not line[0].isspace():
            name = line.strip()
            continue
        if not line.strip():
            if block and name:
                sections[name].append(block)
            block = []
        elif len(line) - len(line.lstrip()) >= 7:
            block.append(line)
        # else: a subsection heading ("   Signal dispositions", indent 3): dropped
    parts = []
    for heading in ("NAME", "DESCRIPTION"):
        for b in sections.get(heading, []):
            text = rd.clean(" ".join(b))
            if text:
                parts.append(text if text[-1] in ".:!?" else text + ".")
    return parts


def manpages_documents(log):
    """One Doc per page of package manpages; parts = its paragraphs."""
    try:
        files = subprocess.run(["dpkg-query", "-L", "manpages"], capture_output=True, text=True,
                               check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        files = []
    pages = sorted(f for f in files if re.match(r"/usr/share/man/man[1-9]/[^/]+$", f) and os.path.isfile(f))
    if not pages or not any(os.access(os.path.join(d, "man"), os.X_OK)
                            for d in os.environ.get("PATH", "/usr/bin").split(":")):
        log.setdefault("missing", []).append("manpages (package or man(1) not installed; source skipped)")
        return
    log["manpages_pages"] = len(pages)
    for page in pages:
        try:
            parts = man_document(render_man(page))
        except (OSError, subprocess.SubprocessError):
            log["manpages_render_failures"] = log.get("manpages_render_failures", 0) + 1
            continue
        yield Doc(parts)


def source_generators(excluded_sources, excluded_packages, excluded_synsets, log):
    """{source: function() -> iterator of Doc}, for SOURCES."""
    return {
        "debian": lambda: debian_documents(excluded_sources, excluded_packages, log),
        "wordnet": lambda: wordnet_documents(excluded_synsets, log),
        "manpages": lambda: manpages_documents(log),
        "gcide": lambda: sources_dictd.dictionary_documents("gcide", log),
        "fortunes": lambda: sources_text.fortunes_documents(log),
        "devil": lambda: sources_dictd.dictionary_documents("devil", log),
        "jargon": lambda: sources_dictd.dictionary_documents("jargon", log),
        "gnome-help": lambda: sources_html.gnome_help_documents(log),
        "libreoffice": lambda: sources_html.libreoffice_help_documents(log),
        "handbook": lambda: sources_html.debian_handbook_documents(log),
        "dref": lambda: sources_html.debian_reference_documents(log),
        "python": lambda: sources_html.python_documents(log),
        "postgresql": lambda: sources_html.postgresql_documents(log),
        "perl": lambda: sources_text.perl_documents(log),
        "foldoc": lambda: sources_dictd.dictionary_documents("foldoc", log),
    }


# --- selection ------------------------------------------------------------------
def words(text):
    return len(text.split())


def select(doc, evalidx, eval_norm, st):
    """The cleaned text of `doc` after the evaluation-data rules, or None
    (the reason counted in st). Parts of a multi-part Doc that overlap an
    evaluation text are dropped one by one; the joined text is checked
    again as a whole."""
    if doc.excluded:
        st["excluded_eval_record"] += 1
        return None
    if isinstance(doc.parts, str):
        kept = [rd.clean(doc.parts)]
    else:
        kept, last_hit = [], None
        for part in doc.parts:
            part = rd.clean(part)
            if not part:
                continue
            hit = evalidx.check(part)
            if hit:
                st["eval_parts_" + hit] += 1
                last_hit = hit
            else:
                kept.append(part)
        if not kept and last_hit:   # every part overlapped: the document is excluded
            st["excluded_eval_" + last_hit] += 1
            return None
    prefix = rd.clean(doc.prefix)
    text = " ".join(([prefix] if prefix else []) + [k for k in kept if k])
    if words(text) < MIN_WORDS:
        st["too_short"] += 1
        return None
    norm = text.lower()
    if norm in eval_norm:
        st["excluded_eval_text"] += 1
        return None
    hit = evalidx.check(text)
    if hit:
        st["excluded_eval_" + hit] += 1
        return None
    return text


def parse_caps(items, no_caps):
    """{source: MB or None} from DEFAULT_CAPS_MB and --cap SOURCE=MB items
    ("none" or "0" in place of MB: no cap)."""
    caps = {} if no_caps else dict(DEFAULT_CAPS_MB)
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or name not in SOURCES:
            sys.exit(f"build_corpus: --cap {item!r}: expected SOURCE=MB with SOURCE one of {', '.join(SOURCES)}")
        if value.lower() in ("none", "0", ""):
            caps.pop(name, None)
        else:
            try:
                caps[name] = float(value)
            except ValueError:
                sys.exit(f"build_corpus: --cap {item!r}: {value!r} is not a number of MB")
    return caps


def parse_sources(value):
    if not value:
        return list(SOURCES)
    names = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in SOURCES]
    if unknown:
        sys.exit(f"build_corpus: unknown source(s) {', '.join(unknown)}; known: {', '.join(SOURCES)}")
    return [s for s in SOURCES if s in names]


# --- main ----------------------------------------------------------------------
def dpkg_version(package):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else "not installed"


def copyright_licence(package):
    """The License: of the "Files: *" paragraph of a machine-readable
    /usr/share/doc/PACKAGE/copyright, else "" (free-form copyright file)."""
    path = f"/usr/share/doc/{package}/copyright"
    try:
        text = open(path, encoding="utf-8", errors="replace").read()
    except OSError:
        return ""
    if not re.match(r"Format:", text):
        return ""
    for para in re.split(r"\n\s*\n", text):
        if re.search(r"^Files:\s*\*\s*$", para, re.M):
            m = re.search(r"^License:\s*(.+)$", para, re.M)
            return m.group(1).strip() if m else ""
    return ""


def main():
    ap = argparse.ArgumentParser(description="Builds the English pretraining corpus (see the module docstring).")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--sources", help="comma-separated subset of: " + ",".join(SOURCES) + " (default: all)")
    ap.add_argument("--cap", action="append", default=[], metavar="SOURCE=MB",
                    help="keep at most MB (10^6 bytes) of SOURCE's text ('none': no cap); defaults: "
                         + ", ".join(f"{k}={v}" for k, v in DEFAULT_CAPS_MB.items()))
    ap.add_argument("--no-caps", action="store_true", help="no default caps (--cap still applies)")
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    selected = parse_sources(args.sources)
    caps = parse_caps(args.cap, args.no_caps)
    os.makedirs(out, exist_ok=True)
    rd.require_inputs()

    # Evaluation data: every evaluation file of examples/ and the record list.
    try:
        eval_counts, eval_texts = eval_data.evaluation_texts()
        sources = rd.read_sources()
    except FileNotFoundError as e:
        sys.exit(f"build_corpus: {e.filename} is missing (run python3 examples/make_real_datasets.py)")
    eval_norm = {rd.normalise(t) for t in eval_texts}
    deb_rows = [r for r in sources if r["dataset"] == "debian_sections"]
    excluded_sources = {r["source"] for r in deb_rows}
    excluded_packages = {r["record"].split(":", 1)[1] for r in deb_rows}
    bodies = debian_example_bodies(excluded_packages, eval_norm)
    evalidx = EvalIndex(eval_texts + bodies)
    excluded_synsets = {r["record"].split(":", 1)[1].rsplit("-", 1)[0] for r in sources
                        if r["dataset"] == "wordnet_supersenses"}

    log = {}
    stats = {s: collections.Counter() for s in selected}
    seen = set()
    docs = []  # (sort key, heldout?, source, text)
    generators = source_generators(excluded_sources, excluded_packages, excluded_synsets, log)
    for source in selected:
        st = stats[source]
        local = {}
        for doc in generators[source]():
            st["records"] += 1
            text = select(doc, evalidx, eval_norm, st)
            if text is None:
                continue
            norm = text.lower()
            if norm in seen or norm in local:
                st["duplicates"] += 1
                continue
            local[norm] = text
        # The cap: documents in sha256 order until the next one would exceed it.
        budget = caps.get(source)
        used, full = 0, False
        for key, norm, text in sorted((rd.stable_hash(n), n, t) for n, t in local.items()):
            size = len(text.encode("utf-8")) + 1
            st["available_documents"] += 1
            st["available_words"] += words(text)
            st["available_bytes"] += size
            if budget is not None and (full or used + size > budget * 1e6):
                full = True
                st["over_cap"] += 1
                continue
            used += size
            seen.add(norm)
            held = int(rd.stable_hash(norm, "heldout:")[:8], 16) % HELDOUT_MODULUS == 0
            docs.append((key, held, source, text))
            st["documents"] += 1
            st["words"] += words(text)
            st["bytes"] += size
            st["heldout"] += held
        print(f"build-corpus: {source}: {st['documents']} documents, {st['bytes'] / 1e6:.1f} MB",
              file=sys.stderr, flush=True)
    docs.sort()

    for name, held in (("train.txt", False), ("heldout.txt", True)):
        tmp = os.path.join(out, name + ".tmp")
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            for _, h, _, text in docs:
                if h == held:
                    f.write(text + "\n")
        os.replace(tmp, os.path.join(out, name))

    total = collections.Counter()
    for st in stats.values():
        total.update(st)
    eval_info = {"counts": eval_counts, "distinct": len(eval_texts), "bodies": len(bodies),
                 "too_short": evalidx.too_short,
                 "ngram_texts": sum(1 for t in eval_texts if len(rd.match_tokens(t)) >= eval_data.NGRAM)}
    write_provenance(out, selected, stats, total, caps, log, eval_info, excluded_sources,
                     excluded_synsets, args)
    print_summary(out, selected, stats, total, caps, log)


def shares(selected, stats, key):
    general = sum(stats[s][key] for s in selected if s in GENERAL)
    every = sum(stats[s][key] for s in selected)
    return general, every


def print_summary(out, selected, stats, total, caps, log):
    mb = total["bytes"] / 1e6
    print(f"build-corpus: {total['documents']} documents, {total['words']} words, {mb:.1f} MB "
          f"-> {out}/train.txt ({total['documents'] - total['heldout']} docs) + heldout.txt "
          f"({total['heldout']} docs)")
    print(f"  {'source':11s} {'records':>8s} {'docs':>8s} {'words':>10s} {'MB':>6s} | {'uncapped':>8s} "
          f"{'cap':>5s} | dropped: dup, short, over cap, eval rec/equal/contained/8-gram, eval parts")
    for s in selected:
        st = stats[s]
        cap = f"{caps[s]:g}" if s in caps else "-"
        print(f"  {s:11s} {st['records']:8d} {st['documents']:8d} {st['words']:10d} {st['bytes'] / 1e6:6.1f} | "
              f"{st['available_bytes'] / 1e6:8.1f} {cap:>5s} | {st['duplicates']}, {st['too_short']}, "
              f"{st['over_cap']}, {st['excluded_eval_record']}/{st['excluded_eval_text']}/"
              f"{st['excluded_eval_contained']}/{st['excluded_eval_ngram']}, "
              f"{st['eval_parts_contained'] + st['eval_parts_ngram']}")
    gw, w = shares(selected, stats, "words")
    gb, b = shares(selected, stats, "bytes")
    print(f"  general prose ({', '.join(s for s in selected if s in GENERAL)}): "
          f"{100.0 * gw / max(1, w):.1f}% of words, {100.0 * gb / max(1, b):.1f}% of bytes")
    print(f"  duplicates dropped {total['duplicates']}; over cap {total['over_cap']}; evaluation "
          f"exclusions: {total['excluded_eval_record']} records, {total['excluded_eval_text']} equal "
          f"texts, {total['excluded_eval_contained']} containing texts, {total['excluded_eval_ngram']} "
          f"sharing an 8-gram; parts dropped: {total['eval_parts_contained']} containing, "
          f"{total['eval_parts_ngram']} sharing an 8-gram")
    for m in log.get("missing", []):
        print(f"  warning: missing {m}")


def source_notes(log):
    """{source: markdown bullet text} describing how each source is read."""
    n = log.get
    return {
        "debian": f"""every record of the Translation-en index of component main of
  {", ".join(rd.suites())} (`Description-en` = short description + long
  description). Document = "Short description. Long description" with the
  Debian control format undone (continuation lines joined, ` .` paragraph
  breaks become a single space), i.e. one package description per line.""",
        "wordnet": """every synset of WordNet 3.0 (`/usr/share/wordnet/data.noun`,
  `data.verb`, `data.adj`, `data.adv`; the licence header lines starting with
  two spaces skipped). Document = "lemma, lemma: gloss" (underscores in lemmas
  become spaces; adjective markers like `(a)` removed; the whole gloss,
  example sentences included).""",
        "manpages": f"""the {n('manpages_pages', 0)} pages of Debian package `manpages` (Linux
  man-pages project) rendered with `MANWIDTH=1000 man --nh --nj -l PAGE`.
  Document = the NAME line and the paragraphs of the DESCRIPTION section
  (subsection headings dropped), one page per line.""",
        "gcide": f"""the {n('gcide_entries', 0)} entries of `/usr/share/dictd/gcide.dict.dz` (GNU
  Collaborative International Dictionary of English 0.48: Webster's Revised
  Unabridged Dictionary of 1913 with WordNet 1.5 and later additions), read
  through its dictd index; the `00-database-*` entries (headers, licence
  preamble) skipped. Document = "headword: senses" per headword (entries of
  one headword, e.g. one per part of speech, merged): GCIDE's ASCII letter
  codes (`[ae]`, `['e]`, `[=a]`) turned into Unicode; pronunciation
  (`\\...\\` and the parenthesis after it), part of speech, every `[...]`
  block (etymology, inflections, usage labels like `[Obs.]`, source tags like
  `[1913 Webster]`, `[WordNet 1.5]`, `[PJC]`), domain labels like `(Zool.)`,
  sense numbers and `Syn:` word lists removed; `Note:`/`Usage:` paragraphs kept
  without their label; literary quotations kept with their `--Author`
  attribution; `{{cross references}}` as plain words; line wraps undone.
  Each sense, note and quotation is a part (see the evaluation rules).""",
        "fortunes": f"""the fortune files of packages `fortunes-min` and `fortunes`
  (`/usr/share/games/fortunes/*`, all UTF-8; no offensive set is installed;
  `ascii-art` (pictures) and `translate-me` (mostly Latin) skipped):
  {", ".join(n('fortunes_files', []))}. Document = one fortune (the text
  between `%` lines), lines joined, the "-- Author" attribution kept;
  {n('fortunes_not_prose', 0)} fortunes that are not prose (pictures, tables) dropped.""",
        "devil": f"""the {n('devil_entries', 0)} entries of `/usr/share/dictd/devil.dict.dz` (Ambrose
  Bierce, The Devil's Dictionary, 1911). Document = "Headword: definition
  verse ..." (the `WORD, n.` head rewritten, `_italics_` marks removed, verse
  lines joined with their attribution).""",
        "jargon": f"""the {n('jargon_entries', 0)} entries of `/usr/share/dictd/jargon.dict.dz` (The
  Jargon File 4.4.7). Document = "headword: paragraphs": pronunciation/part of
  speech line, leading usage labels like `[techspeak]` and sense numbers
  removed; paragraphs indented deeper than the body (code, verse) dropped.""",
        "gnome-help": f"""the {n('gnome-help_pages', 0)} Mallard pages of `/usr/share/help/C/*/*.page`
  (GNOME Help and the system administration guide; C = the English originals):
  page and section titles and the text of `<p>`, `<item>`, `<title>`;
  `<info>` (credits, link lists), block `<code>`, `<screen>`, `<synopsis>`
  skipped.""",
        "libreoffice": f"""the {n('libreoffice_pages', 0)} HTML pages of
  `/usr/share/libreoffice/help/en-US/text/` (LibreOffice 7.4 help): the
  content area (`#DisplayArea`) only, headings and `<p>`, `<li>`, `<dd>` text;
  navigation, index, scripts, "To access this command" menu paths and tables
  skipped.""",
        "handbook": f"""the {n('handbook_pages', 0)} HTML pages of
  `/usr/share/doc/debian-handbook/html/en-US/` (The Debian Administrator's
  Handbook, DocBook): headings and the text of paragraphs (`div.para`, `<p>`),
  list items and definitions; navigation, tables of contents, index terms,
  program listings, screens and tables skipped.""",
        "dref": f"""the {n('dref_pages', 0)} English HTML pages
  `/usr/share/debian-reference/*.en.html` (Debian Reference, DocBook), same
  rules as the handbook (its many package tables skipped).""",
        "python": f"""the {n('python_pages', 0)} HTML pages of `/usr/share/doc/python3.11/html/`
  (Sphinx) without `genindex*`, `search`, `py-modindex`, `contents`, `index`,
  `download`, `bugs`, `copyright`, `license`, `about`: headings and the text
  of `<p>`, `<li>`, `<dd>` of the main content; `<pre>`/highlighted code,
  signatures (`<dt>`), tables, sidebars, tables of contents and admonition
  titles skipped. The "What's New" essays are kept (the changelog,
  `changelog.html.gz`, is not read).""",
        "postgresql": f"""the {n('postgresql_pages', 0)} HTML pages of
  `/usr/share/doc/postgresql-doc-15/html/` (DocBook), same rules as the
  handbook (SQL synopses, program listings and tables skipped).""",
        "perl": f"""the {n('perl_pages', 0)} POD files of `/usr/share/perl/5.36.0/pod/` (package
  `perl-doc`) without the change logs (`perl*delta`, `perlhist`), the table of
  contents, the licences, the Unicode property tables and the Chinese,
  Japanese, Korean and Taiwanese introductions: `=head1`/`=head2` titles and
  ordinary paragraphs, `=item`/`=head3` texts as paragraphs, formatting codes
  resolved (`C<x>` -> x, `L<text|target>` -> text, `E<lt>` -> <); verbatim
  (code) paragraphs and `=begin`/`=end` blocks skipped.""",
        "foldoc": f"""the {n('foldoc_entries', 0)} entries of `/usr/share/dictd/foldoc.dict.dz` (Free
  On-line Dictionary of Computing, 2023-01-19). Document = "headword:
  paragraphs": subject tags (`<programming>`), sense numbers, dates
  (`(1994-11-08)`), bibliography paragraphs (`[...]`) and URLs removed.""",
    }


LICENCES = {
    "debian": """Debian package descriptions: part of each package's `debian/control` in
  Debian main, distributed under the DFSG-free licence of the respective
  package (`/usr/share/doc/PACKAGE/copyright`,
  https://packages.debian.org/bookworm/PACKAGE).""",
    "wordnet": """WordNet 3.0: "WordNet 3.0 license" (Princeton University; permissive,
  BSD-style: use, copy, modify and distribute for any purpose without fee,
  provided the copyright notice, statements and disclaimer appear on all
  copies). Full text: `/usr/share/doc/wordnet-base/copyright` (License:
  WordNet3.0); "WordNet 3.0 Copyright 2006 by Princeton University. All
  rights reserved." """,
    "manpages": """Linux man-pages (package `manpages`): per-page licences, mostly
  "Linux-man-pages-copyleft" (verbatim copying and modified versions
  permitted), some GPL-2+, BSD and Expat; see
  `/usr/share/doc/manpages/copyright`.""",
    "gcide": """GCIDE (`dict-gcide`): GPL-2 or later ("GCIDE is free software; you can
  redistribute it and/or modify it under the terms of the GNU General Public
  License ... version 2, or (at your option) any later version");
  `/usr/share/doc/dict-gcide/copyright`. Webster's 1913 text is in the public
  domain; WordNet 1.5 glosses are under the WordNet licence.""",
    "fortunes": """fortunes (`fortunes-min`, `fortunes`): the package's copyright file gives the
  BSD licence of fortune-mod (University of California) and notes on the
  origin of some files (e.g. `cookie` from alt.sources postings); the
  collected quotations themselves carry no licence statement of their own
  (`/usr/share/doc/fortunes/copyright`). Shipped in Debian main.""",
    "devil": """The Devil's Dictionary (`dict-devil`): public domain ("its copyright has
  expired"); `/usr/share/doc/dict-devil/copyright`.""",
    "jargon": """The Jargon File (`dict-jargon`): public domain ("to be freely used,
  shared, and modified"); `/usr/share/doc/dict-jargon/copyright`.""",
    "gnome-help": """GNOME user documentation (`gnome-user-docs`): CC-BY-SA-3.0 (Creative
  Commons Attribution-ShareAlike 3.0 Unported); `/usr/share/doc/gnome-user-docs/copyright`.""",
    "libreoffice": """LibreOffice help (`libreoffice-help-en-us`): MPL-2.0, some files with
  Apache-2.0 material (Oracle/Apache OpenOffice heritage);
  `/usr/share/doc/libreoffice-help-en-us/copyright`.""",
    "handbook": """The Debian Administrator's Handbook (`debian-handbook`): GPL-2.0+ or
  CC-BY-SA-3.0 (Raphaël Hertzog, Roland Mas, Freexian SARL);
  `/usr/share/doc/debian-handbook/copyright`.""",
    "dref": """Debian Reference (`debian-reference-en`): GPL-2+ (Osamu Aoki);
  `/usr/share/doc/debian-reference-en/copyright`.""",
    "python": """Python documentation (`python3.11-doc`): PSF License Agreement for Python
  3.11 (Python Software Foundation); `/usr/share/doc/python3.11-doc/copyright`.""",
    "postgresql": """PostgreSQL documentation (`postgresql-doc-15`): PostgreSQL Licence
  (BSD-style; PostgreSQL Global Development Group, University of California);
  `/usr/share/doc/postgresql-doc-15/copyright`.""",
    "perl": """Perl documentation (`perl-doc`): GPL-1+ or Artistic (Larry Wall and
  others); `/usr/share/doc/perl-doc/copyright`.""",
    "foldoc": """FOLDOC (`dict-foldoc`): GNU Free Documentation License 1.1 or later, with no
  Invariant Sections, Front- or Back-Cover Texts (Denis Howe); the Debian
  additions (Dictionary.debian) under a verbatim-copying/same-terms notice;
  `/usr/share/doc/dict-foldoc/copyright`.""",
}


def write_provenance(out, selected, stats, total, caps, log, eval_info, excluded_sources,
                     excluded_synsets, args):
    prov = []
    for suite in rd.suites():
        for kind in ("Packages", "Translation-en"):
            path = rd.find_list(suite, kind)
            if path:
                prov.append(rd.index_provenance(suite, kind, path))
    snapshot = "\n".join(
        f"| {p['suite']} | `{p['index']}` | {p['version']} | {p['date']} | `{p['sha256']}` | "
        f"{'yes' if p['verified'] else 'NO'} |" for p in prov)
    sources_list = ""
    if os.path.exists("/etc/apt/sources.list.d/debian.sources"):
        sources_list = open("/etc/apt/sources.list.d/debian.sources", encoding="utf-8").read().strip()

    installed = [p for s in selected for p in PACKAGES[s] if p not in DEPENDENCIES_ONLY]
    package_rows = "\n".join(
        f"| {s} | `{p}` | {dpkg_version(p)} | {copyright_licence(p) or 'see Licences'} |"
        for s in selected for p in PACKAGES[s])

    def kind(s):
        return "general" if s in GENERAL else "technical"

    def row(name, k, st):
        return (f"| {name} | {k} | {st['records']} | {st['documents']} | {st['heldout']} | {st['words']} | "
                f"{st['bytes']} | {st['too_short']} | {st['duplicates']} | {st['over_cap']} | "
                f"{st['excluded_eval_record']} | {st['excluded_eval_text']} | "
                f"{st['excluded_eval_contained']} | {st['excluded_eval_ngram']} | "
                f"{st['eval_parts_contained']} | {st['eval_parts_ngram']} |")

    table = "\n".join(row(s, kind(s), stats[s]) for s in selected) + "\n" + row("**total**", "", total)

    def cap_row(s, st):
        cap = f"{caps[s]:g}" if s in caps else "none"
        return (f"| {s} | {cap} | {st['available_documents']} | {st['available_words']} | "
                f"{st['available_bytes'] / 1e6:.2f} | {st['documents']} | {st['words']} | "
                f"{st['bytes'] / 1e6:.2f} |")

    cap_table = "\n".join(cap_row(s, stats[s]) for s in selected)
    gw, w = shares(selected, stats, "words")
    gb, b = shares(selected, stats, "bytes")
    missing = "".join(f"\n- WARNING: missing {m}" for m in log.get("missing", []))
    notes = source_notes(log)
    source_text = "\n".join(f"- **{s}**: {notes[s]}" for s in selected)
    dropped = [f"{s}: {log.get(s + '_not_prose', 0)} not prose, {log.get(s + '_repeated', 0)} repeated"
               for s in selected if s + "_not_prose" in log or s + "_repeated" in log]
    licences = "\n".join(f"- {LICENCES[s]}" for s in selected)
    eval_list = "\n".join(f"| `{d}` | {c} |" for d, c in sorted(eval_info["counts"].items()))
    command = ["python3", "scripts/corpus/build_corpus.py", "--out", out]
    if args.sources:
        command += ["--sources", args.sources]
    if args.no_caps:
        command.append("--no-caps")
    for c in args.cap:
        command += ["--cap", c]
    caps_text = ", ".join(f"{s} {caps[s]:g} MB" for s in selected if s in caps) or "none"
    text = f"""# Pretraining corpus: provenance

Written by `scripts/build-corpus.sh` (helper `scripts/corpus/build_corpus.py`).
`train.txt` and `heldout.txt`: UTF-8, one document per line.

## Commands

    apt-get update -o Acquire::Languages=en     # Packages + Translation-en indexes
    apt-get install -y --no-install-recommends {" ".join(dict.fromkeys(installed))}
    {" ".join(command)}

| source | package | version | `License:` of `Files: *` in its copyright file (machine-readable ones) |
|---|---|---|---|
{package_rows}

## Apt snapshot

`/etc/apt/sources.list.d/debian.sources` (the snapshot.debian.org lines are
comments; apt fetches from deb.debian.org, so the indexes are identified by
release, InRelease date and hash below; "verified" = the sha256 of the
decompressed index equals the one in the suite's signed InRelease):

```
{sources_list}
```

| suite | index | release | InRelease date | sha256 | verified |
|---|---|---|---|---|---|
{snapshot}

## Sources and counts

| source | kind | records | documents | of which held out | words | bytes | too short | duplicates | over cap | eval records | eval texts (equal) | eval texts (contained) | eval 8-gram overlap | eval parts dropped (contained) | eval parts dropped (8-gram overlap) |
|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
{table}
{missing}

General English prose ({", ".join(s for s in selected if s in GENERAL)}):
{100.0 * gw / max(1, w):.1f}% of the words, {100.0 * gb / max(1, b):.1f}% of the bytes; the rest is
technical (package descriptions, manuals, FOLDOC).

Caps (MB = 10^6 bytes of cleaned text, newline included; per source,
documents in sha256 order of their normalised text until the next one would
exceed the cap): {caps_text}. What each source yields before and after its cap:

| source | cap (MB) | documents before cap | words before cap | MB before cap | documents kept | words kept | MB kept |
|---|---:|---:|---:|---:|---:|---:|---:|
{cap_table}

{source_text}

Paragraphs dropped by the page readers (not prose: under 4 words, under 70%
letters, over 3% code symbols or a word over 40 characters; repeated: seen
before in the same source): {"; ".join(dropped) or "none"}.

Processing: Unicode NFC, control characters dropped, whitespace collapsed;
documents of fewer than {MIN_WORDS} words dropped ("too short"); exact
duplicates after normalisation (lowercase + collapsed whitespace) dropped,
first occurrence kept, sources in the order of the table (the
-updates/-security Translation-en indexes mostly repeat bookworm's, hence most
Debian duplicates; a document a source's cap drops does not count as seen);
per source, the cap; ordered by sha256 of the normalised text; held out when
the first 32 bits of sha256("heldout:" + normalised text) are 0 mod
{HELDOUT_MODULUS}.

## Evaluation data excluded

The {eval_info['distinct']} distinct texts (after normalisation) of the
evaluation files of `examples/` (`scripts/corpus/eval_data.py`: the `text`
column of the CSV files, `text`/`text_pair`/`tokens` of the JSONL files, every
SQuAD context and question of the JSON files) and the records listed in
`examples/real_datasets_sources.txt` are kept out:

| dataset | texts |
|---|---:|
{eval_list}

- eval records: every Translation-en record of a binary package built by one
  of the {len(excluded_sources)} source packages of a `debian_sections` example
  ({log.get('debian_excluded_binary_packages', 0)} binary packages, mapped through the `Source:` fields of the Packages
  indexes), and the {len(excluded_synsets)} WordNet noun synsets of `wordnet_supersenses`;
- eval texts (equal): documents equal to an evaluation text after
  normalisation;
- eval texts (contained): documents that contain an evaluation text of at
  least {eval_data.MIN_CONTAINMENT_TOKENS} tokens, or the long-description part of a `debian_sections`
  example (its text after the short description, when at least 8 tokens;
  {eval_info['bodies']} such parts), as a contiguous sequence of word/punctuation tokens
  (`\\w+|[^\\w\\s]`, after lowercasing): e.g. a package of another source
  package of the same project repeating the example's paragraph, or a gloss
  embedding a dataset definition. {eval_info['too_short']} evaluation texts have fewer than
  {eval_data.MIN_CONTAINMENT_TOKENS} tokens and are only checked for equality;
- eval 8-gram overlap: documents that share any sequence of {eval_data.NGRAM} such tokens
  with an evaluation text of at least {eval_data.NGRAM} tokens ({eval_info['ngram_texts']} texts); near
  duplicates, e.g. GCIDE's WordNet 1.5 glosses of the `wordnet_supersenses`
  synsets, or a package repeating a sentence of a `debian_sections` example;
- eval parts dropped: in documents made of parts (dictionary entries: senses,
  notes, quotations; pages: paragraphs and titles; man pages: paragraphs),
  a part that contains an evaluation text or shares an {eval_data.NGRAM}-gram with one is
  dropped and the rest kept; the joined document is then checked again as a
  whole (and dropped, counted in the columns before, if it still overlaps; a
  document all of whose parts are dropped counts there too).

`python3 scripts/corpus/check_overlap.py --corpus DIR` verifies the result
independently (every n-gram of 4 to 7 tokens and every {eval_data.NGRAM}-gram of the corpus
against the evaluation texts).

## Licences

{licences}
"""
    with open(os.path.join(out, "PROVENANCE.md"), "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
