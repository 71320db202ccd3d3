"""Reading labelled datasets for UploadDataset: every task kind's examples.

A port of the C++ client's reader (common/dataset_file.h), with the same rules
and, for most errors, the same messages: ``"<name>: line <N>: <message>"``
(in a SQuAD file, the path of the offending value instead of the line). The
reader does not know the task's kind: it maps whatever members a record has
to the ``Example``'s fields and checks only their types and what holds for
every kind; the server checks the rest against the task when a job trains.

Formats:

* CSV (RFC 4180) with a header naming ``text`` and ``label`` and/or
  ``labels`` (``|``-separated), optionally ``text_pair``; cells as written
  (regression targets are the ``label`` column, "3.25").
* JSON Lines, one object per line, with the members ``text``, ``text_pair``,
  ``label`` (a string, or a number: integers in decimal, other numbers in the
  shortest form that reads back as the same double), ``labels``, ``tokens`` +
  ``tags``, ``entities`` ([{"start", "end", "label"}], code points),
  ``question`` + ``context`` (extractive QA), ``answers`` ([{"text",
  "answer_start"}]) and ``is_impossible``. Every line needs a target.
* SQuAD v1.1 / v2.0 JSON as published: one example per question.

Rows given to :meth:`adapterd.Client.upload_dataset` as Python dicts follow
the JSON Lines rules (their place in errors reads ``row <N>``); ``Example``
messages are taken as they are.

Format detection (``format=None``): by extension (.csv; .jsonl/.ndjson; .json
is SQuAD when the content is one object with a "data" array, else JSON Lines);
any other name by content (SQuAD as for .json, else JSON Lines when the first
non-blank character is ``{``, else CSV).

All errors raise :class:`adapterd.errors.InvalidArgument` (the code the server
gives bad data); a missing file raises ``FileNotFoundError``.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple, Union

from adapterd._stubs import pb
from adapterd.errors import InvalidArgument

PathLike = Union[str, "os.PathLike[str]"]
Row = Union[Mapping[str, Any], Any]  # a dict (JSON Lines members) or an adapterd.v1 Example

_BOM = "\ufeff"
_MAX_OFFSET = 2**31 - 1
_CSV_COLUMNS = ("text", "text_pair", "label", "labels")
_JSON_ONLY = ("tokens", "tags", "entities", "question", "context", "answers")
_FORMATS = {"csv": "csv", "jsonl": "jsonl", "json": "jsonl", "ndjson": "jsonl", "squad": "squad", "auto": None}


def _error(name: str, where: Optional[str], message: str) -> InvalidArgument:
    return InvalidArgument(None, f"{name}: {where}: {message}" if where else f"{name}: {message}")


def _type_name(value: Any) -> str:
    """nlohmann::json's type names, which the C++ client's messages use."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def parse_format(name: Optional[str]) -> Optional[str]:
    """"csv", "jsonl" or "squad" from a format name ("auto"/None = detect); InvalidArgument otherwise."""
    if name is None:
        return None
    key = name.strip().lower()
    if key not in _FORMATS:
        raise InvalidArgument(None, f"unknown dataset format '{name}' (use csv, jsonl or squad)")
    return _FORMATS[key]


def _extension(name: str) -> str:
    base = name.rsplit("/", 1)[-1]
    return base.rsplit(".", 1)[-1].lower() if "." in base else ""


# --- Checks every example passes ----------------------------------------------


def _validate(example: Any, name: str, where: str) -> None:
    if example.tokens:
        if example.text:
            raise _error(name, where, '"text" must be absent or empty with "tokens" (the tokens are the text)')
    elif not example.text:
        raise _error(name, where, "empty text")


# --- CSV ------------------------------------------------------------------------


class _CsvReader:
    """RFC 4180 records with the line each starts on; empty lines skipped."""

    def __init__(self, text: str, name: str) -> None:
        self._in = text[1:] if text.startswith(_BOM) else text
        self._name = name
        self._pos = 0
        self._line = 1

    def _at_line_break(self) -> bool:
        s, p = self._in, self._pos
        if p >= len(s):
            return False
        if s[p] == "\n":
            return True
        return s[p] == "\r" and (p + 1 == len(s) or s[p + 1] == "\n")

    def _skip_line_break(self) -> None:
        s, p = self._in, self._pos
        self._pos += 2 if s[p] == "\r" and p + 1 < len(s) else 1
        self._line += 1

    def _field(self) -> str:
        s = self._in
        if self._pos < len(s) and s[self._pos] == '"':
            return self._quoted_field()
        start = self._pos
        while self._pos < len(s) and s[self._pos] != "," and not self._at_line_break():
            if s[self._pos] == '"':
                raise _error(
                    self._name,
                    f"line {self._line}",
                    "quote inside an unquoted field (quote the whole field and double the quotes inside it)",
                )
            self._pos += 1
        return s[start:self._pos]

    def _quoted_field(self) -> str:
        s = self._in
        start_line = self._line
        self._pos += 1
        out: List[str] = []
        while True:
            if self._pos >= len(s):
                raise _error(self._name, f"line {start_line}", "unterminated quoted field")
            c = s[self._pos]
            self._pos += 1
            if c == '"':
                if self._pos < len(s) and s[self._pos] == '"':
                    out.append('"')
                    self._pos += 1
                    continue
                break
            if c == "\n":
                self._line += 1
            out.append(c)
        if self._pos < len(s) and s[self._pos] != "," and not self._at_line_break():
            raise _error(self._name, f"line {self._line}", "unexpected character after a closing quote")
        return "".join(out)

    def records(self) -> Iterator[Tuple[int, List[str]]]:
        s = self._in
        while True:
            while self._at_line_break():
                self._skip_line_break()
            if self._pos >= len(s):
                return
            line = self._line
            fields: List[str] = []
            while True:
                fields.append(self._field())
                if self._pos >= len(s):
                    break
                if s[self._pos] == ",":
                    self._pos += 1
                    continue
                self._skip_line_break()
                break
            yield line, fields


def _split_labels(cell: str, name: str, line: int) -> List[str]:
    if not cell.strip(" \t\n\r\f\v"):
        return []
    labels = [part.strip(" \t\n\r\f\v") for part in cell.split("|")]
    if any(not label for label in labels):
        raise _error(
            name,
            f"line {line}",
            f"empty label in labels '{cell}' (separate labels with a single '|'; an empty cell is no labels)",
        )
    return labels


def _parse_csv(text: str, name: str) -> Iterator[Any]:
    records = _CsvReader(text, name).records()
    header = next(records, None)
    if header is None:
        raise _error(name, "line 1", "no header row (expected 'text,label')")
    header_line, header_fields = header
    columns: Dict[str, int] = {}
    for i, raw in enumerate(header_fields):
        column = raw.strip(" \t\n\r\f\v")
        if column not in _CSV_COLUMNS:
            hint = (
                "; token classification and extractive QA datasets must be JSON Lines or SQuAD JSON"
                if column in _JSON_ONLY
                else ""
            )
            raise _error(
                name,
                f"line {header_line}",
                f"unknown column '{column}' in the header (expected text, label and/or labels, and optionally "
                f"text_pair{hint})",
            )
        if column in columns:
            raise _error(name, f"line {header_line}", f"duplicate column '{column}'")
        columns[column] = i
    if "text" not in columns:
        raise _error(
            name,
            f"line {header_line}",
            "the header has no 'text' column (expected 'text,label' or 'text,text_pair,label')",
        )
    if "label" not in columns and "labels" not in columns:
        raise _error(
            name,
            f"line {header_line}",
            "the header has no 'label' or 'labels' column (expected 'text,label', 'text,text_pair,label' or "
            "'text,labels')",
        )
    count = 0
    for line, fields in records:
        if len(fields) != len(header_fields):
            raise _error(
                name,
                f"line {line}",
                f"expected {len(header_fields)} fields ({','.join(header_fields)}), got {len(fields)} "
                "(quote fields that contain commas)",
            )
        example = pb.Example(text=fields[columns["text"]])
        if "text_pair" in columns:
            example.text_pair = fields[columns["text_pair"]]
        if "label" in columns:
            example.label = fields[columns["label"]]
        if "labels" in columns:
            example.labels.extend(_split_labels(fields[columns["labels"]], name, line))
        _validate(example, name, f"line {line}")
        if "label" in columns and not example.label:
            raise _error(name, f"line {line}", "empty label")
        count += 1
        yield example
    if count == 0:
        raise _error(name, None, "no examples after the header row")


# --- JSON -------------------------------------------------------------------------


def _reject_constant(token: str) -> float:
    raise ValueError(f"invalid number {token}")


def _loads(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


class _Place:
    """Where a JSON value is, for errors: "line 3", "row 3" or a SQuAD path."""

    __slots__ = ("name", "where")

    def __init__(self, name: str, where: str) -> None:
        self.name = name
        self.where = where

    def error(self, message: str) -> InvalidArgument:
        return _error(self.name, self.where, message)


def _member(obj: Mapping[str, Any], key: str) -> Any:
    """The member, or None when absent or null."""
    return obj.get(key)


def _string(value: Any, place: _Place, what: str) -> str:
    if not isinstance(value, str):
        raise place.error(f"{what} must be a string, got {_type_name(value)}")
    return value


def _label_text(value: Any) -> Optional[str]:
    """A label from a string, or a number (integers in decimal, other numbers in shortest round-trip form)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return repr(value)  # shortest form that reads back as the same double, as nlohmann writes it
    return None


def _string_array(value: Any, place: _Place, key: str, numbers: bool) -> List[str]:
    kinds = "strings or numbers" if numbers else "strings"
    if not isinstance(value, (list, tuple)):
        raise place.error(f'"{key}" must be an array of {kinds}, got {_type_name(value)}')
    out: List[str] = []
    for i, element in enumerate(value):
        text = _label_text(element) if numbers else (element if isinstance(element, str) else None)
        if text is None:
            raise place.error(
                f"{key}[{i}] must be a {'string or a number' if numbers else 'string'}, got {_type_name(element)}"
            )
        if not text:
            raise place.error(f"{key}[{i}] is empty")
        out.append(text)
    return out


def _offset(obj: Mapping[str, Any], key: str, place: _Place, what: str) -> int:
    value = _member(obj, key)
    if value is None:
        raise place.error(f"{what} is missing")
    if isinstance(value, bool) or not isinstance(value, int):
        extra = f" {value!r}" if isinstance(value, float) else ""
        raise place.error(f"{what} must be an integer, got {_type_name(value)}{extra}")
    if value < 0:
        raise place.error(f"{what} is negative ({value})")
    if value > _MAX_OFFSET:
        raise place.error(f"{what} is too large ({value}; at most {_MAX_OFFSET})")
    return value


def _entities(value: Any, place: _Place, example: Any) -> None:
    if not isinstance(value, (list, tuple)):
        raise place.error(
            f'"entities" must be an array of {{"start", "end", "label"}} objects, got {_type_name(value)}'
        )
    for i, entity in enumerate(value):
        path = f"entities[{i}]"
        if not isinstance(entity, Mapping):
            raise place.error(f'{path} must be an object {{"start", "end", "label"}}, got {_type_name(entity)}')
        start = _offset(entity, "start", place, path + ".start")
        end = _offset(entity, "end", place, path + ".end")
        if start >= end:
            raise place.error(f"{path}: start {start} is not before end {end} (offsets are code points, [start, end))")
        label = _member(entity, "label")
        if label is None:
            raise place.error(f"{path}.label is missing")
        label = _string(label, place, path + ".label")
        if not label:
            raise place.error(f"{path}.label is empty")
        example.entities.add(start=start, end=end, label=label)


def _answers(obj: Mapping[str, Any], place: _Place, example: Any) -> bool:
    """Reads "answers" and "is_impossible"; True when either is present."""
    answers = _member(obj, "answers")
    impossible = _member(obj, "is_impossible")
    if impossible is not None and not isinstance(impossible, bool):
        raise place.error(f'"is_impossible" must be a boolean, got {_type_name(impossible)}')
    if answers is not None:
        if not isinstance(answers, (list, tuple)):
            raise place.error(
                f'"answers" must be an array of {{"text", "answer_start"}} objects, got {_type_name(answers)}'
            )
        for i, answer in enumerate(answers):
            path = f"answers[{i}]"
            if not isinstance(answer, Mapping):
                raise place.error(f'{path} must be an object {{"text", "answer_start"}}, got {_type_name(answer)}')
            text = _member(answer, "text")
            if text is None:
                raise place.error(f"{path}.text is missing")
            text = _string(text, place, path + ".text")
            if not text:
                raise place.error(f"{path}.text is empty")
            start = _offset(answer, "answer_start", place, path + ".answer_start")
            example.answers.add(text=text, answer_start=start)
    if impossible is True and len(example.answers) > 0:
        raise place.error(
            '"is_impossible" is true but "answers" is not empty (an unanswerable question has "answers": [])'
        )
    if impossible is False and len(example.answers) == 0:
        raise place.error('"is_impossible" is false but there are no answers')
    return answers is not None or impossible is not None


def example_from_mapping(obj: Mapping[str, Any], name: str = "rows", where: str = "row 1") -> Any:
    """One ``adapterd.v1.Example`` from a JSON Lines object (or a Python dict with the same members).

    Raises InvalidArgument ``"<name>: <where>: ..."`` for a record the server could never take.
    """
    place = _Place(name, where)
    example = pb.Example()
    question = _member(obj, "question")
    context = _member(obj, "context")
    tokens = _member(obj, "tokens")
    tags = _member(obj, "tags")
    is_question = question is not None or context is not None
    if is_question:
        if "text" in obj or _member(obj, "text_pair") is not None:
            raise place.error('"question" and "context" (extractive QA) cannot be combined with "text" or "text_pair"')
        if question is None:
            raise place.error('missing key "question"')
        if context is None:
            raise place.error('missing key "context"')
        example.text = _string(question, place, '"question"')
        example.text_pair = _string(context, place, '"context"')
        if not example.text:
            raise place.error("empty question")
        if not example.text_pair:
            raise place.error("empty context")
    else:
        if "text" in obj:  # a null text is a wrong type, not an absent one
            example.text = _string(obj["text"], place, '"text"')
        elif tokens is None:
            raise place.error('missing key "text"')
        text_pair = _member(obj, "text_pair")
        if text_pair is not None:
            example.text_pair = _string(text_pair, place, '"text_pair"')

    has_target = False
    has_label = False
    if "label" in obj:
        label = _label_text(obj["label"])
        if label is None:
            raise place.error(f'"label" must be a string or a number, got {_type_name(obj["label"])}')
        example.label = label
        has_label = has_target = True
    labels = _member(obj, "labels")
    if labels is not None:
        example.labels.extend(_string_array(labels, place, "labels", numbers=True))
        has_target = True
    if tokens is not None and tags is None:
        raise place.error('"tokens" without "tags" (token classification needs one tag per token)')
    if tags is not None and tokens is None:
        raise place.error('"tags" without "tokens" (token classification needs one tag per token)')
    if tokens is not None:
        example.tokens.extend(_string_array(tokens, place, "tokens", numbers=False))
        example.tags.extend(_string_array(tags, place, "tags", numbers=False))
        if len(example.tokens) != len(example.tags):
            raise place.error(
                f'"tokens" has {len(example.tokens)} elements but "tags" has {len(example.tags)} (one tag per token)'
            )
        if not example.tokens:
            raise place.error('"tokens" is empty')
        has_target = True
    entities = _member(obj, "entities")
    if entities is not None:
        if tokens is not None:
            raise place.error(
                '"entities" are offsets into "text": give either "text" and "entities" or "tokens" and "tags"'
            )
        _entities(entities, place, example)
        has_target = True
    has_target = _answers(obj, place, example) or has_target
    if not has_target:
        if is_question:
            raise place.error('missing key "answers" (the gold answers; "answers": [] for an unanswerable question)')
        raise place.error(
            'missing key "label" (every line needs a target: "label", "labels", "tokens" and "tags", '
            '"entities", or "question", "context" and "answers")'
        )
    _validate(example, name, where)
    if has_label and not example.label:
        raise place.error("empty label")
    return example


def _parse_jsonl(text: str, name: str) -> Iterator[Any]:
    if text.startswith(_BOM):
        text = text[1:]
    count = 0
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip(" \t\n\r\f\v")
        if not line:
            continue
        try:
            obj = _loads(line)
        except ValueError as error:
            raise _error(name, f"line {number}", f"invalid JSON: {error}") from None
        if not isinstance(obj, dict):
            raise _error(
                name,
                f"line {number}",
                f"expected a JSON object, got {_type_name(obj)} (JSON Lines: one object per line)",
            )
        count += 1
        yield example_from_mapping(obj, name, f"line {number}")
    if count == 0:
        raise _error(name, None, "no examples")


def _is_squad(document: Any) -> bool:
    return isinstance(document, dict) and isinstance(document.get("data"), list)


def _parse_squad(document: Any, name: str) -> Iterator[Any]:
    shape = '(SQuAD: {"data": [{"paragraphs": [{"context": ..., "qas": [{"question": ..., "answers": [...]}]}]}]})'
    if not isinstance(document, dict):
        raise _error(name, None, f"expected a JSON object, got {_type_name(document)} {shape}")
    data = document.get("data")
    if not isinstance(data, list):
        raise _error(name, None, ('missing key "data" ' if data is None else '"data" must be an array ') + shape)

    def array(obj: Mapping[str, Any], key: str, place: _Place) -> List[Any]:
        value = _member(obj, key)
        if value is None:
            raise place.error(f'missing key "{key}"')
        if not isinstance(value, list):
            raise place.error(f'"{key}" must be an array, got {_type_name(value)}')
        return value

    def expect_object(value: Any, place: _Place) -> None:
        if not isinstance(value, dict):
            raise place.error(f"expected an object, got {_type_name(value)}")

    count = 0
    for i, article in enumerate(data):
        article_place = _Place(name, f"data[{i}]")
        expect_object(article, article_place)
        for j, paragraph in enumerate(array(article, "paragraphs", article_place)):
            paragraph_place = _Place(name, f"{article_place.where}.paragraphs[{j}]")
            expect_object(paragraph, paragraph_place)
            context = _member(paragraph, "context")
            if context is None:
                raise paragraph_place.error('missing key "context"')
            context = _string(context, paragraph_place, '"context"')
            if not context:
                raise paragraph_place.error("empty context")
            for k, qa in enumerate(array(paragraph, "qas", paragraph_place)):
                place = _Place(name, f"{paragraph_place.where}.qas[{k}]")
                expect_object(qa, place)
                question = _member(qa, "question")
                if question is None:
                    raise place.error('missing key "question"')
                example = pb.Example(text=_string(question, place, '"question"'), text_pair=context)
                if not example.text:
                    raise place.error("empty question")
                if not _answers(qa, place, example):
                    raise place.error(
                        'missing key "answers" (the gold answers; "answers": [] for an unanswerable question)'
                    )
                _validate(example, name, place.where)
                count += 1
                yield example
    if count == 0:
        raise _error(name, None, "no examples")


def _decode(contents: bytes, name: str) -> str:
    try:
        return contents.decode("utf-8")
    except UnicodeDecodeError as error:
        line = contents.count(b"\n", 0, error.start) + 1
        raise _error(name, f"line {line}", "invalid UTF-8") from None


def parse_dataset(contents: Union[bytes, str], name: str, format: Optional[str] = None) -> Iterator[Any]:
    """The examples of a dataset file's ``contents``, lazily, in file order.

    ``name`` is used in errors and, when ``format`` is None or "auto", to pick
    the format (see the module's docstring). A file without examples is an
    error. Errors raise InvalidArgument as the examples are produced, so an
    upload that streams them stops (and stores nothing) at the first.
    """
    fmt = parse_format(format)
    text = _decode(contents, name) if isinstance(contents, bytes) else contents
    body = (text[1:] if text.startswith(_BOM) else text).strip(" \t\n\r\f\v")
    if not body:
        raise _error(
            name, None, "the file is empty (expected a CSV header 'text,label', JSON lines or a SQuAD JSON document)"
        )
    document: Any = None
    if fmt is None:
        ext = _extension(name)
        known = {"csv": "csv", "jsonl": "jsonl", "ndjson": "jsonl", "json": "jsonl"}.get(ext)
        if (known is None or ext == "json") and body.startswith("{"):
            try:
                candidate = _loads(body)
            except ValueError:
                candidate = None
            if _is_squad(candidate):
                document, fmt = candidate, "squad"
        if fmt is None:
            fmt = known or ("jsonl" if body.startswith("{") else "csv")
    if fmt == "csv":
        return _parse_csv(text, name)
    if fmt == "squad":
        if document is None:
            try:
                document = _loads(body)
            except ValueError as error:
                raise _error(name, None, f"invalid JSON: {error}") from None
        return _parse_squad(document, name)
    return _parse_jsonl(text, name)


def read_dataset_file(path: PathLike, format: Optional[str] = None) -> Iterator[Any]:
    """The examples of the dataset file at ``path`` (read whole, then parsed lazily).

    FileNotFoundError for a missing file; InvalidArgument for bad contents.
    """
    name = os.fspath(path)
    with open(name, "rb") as f:
        contents = f.read()
    return parse_dataset(contents, name, format)


def examples_from_rows(rows: Iterable[Row], name: str = "rows") -> Iterator[Any]:
    """Examples from dicts (JSON Lines members) or ``Example`` messages, lazily; at least one is required."""
    count = 0
    for number, row in enumerate(rows, start=1):
        if isinstance(row, pb.Example):
            example = row
            _validate(example, name, f"row {number}")
        elif isinstance(row, Mapping):
            example = example_from_mapping(row, name, f"row {number}")
        else:
            raise _error(name, f"row {number}", f"expected a dict or an Example, got {type(row).__name__}")
        count += 1
        yield example
    if count == 0:
        raise _error(name, None, "no examples")


def plan_chunks(examples: Iterable[Any], max_chunk_bytes: int) -> Iterator[List[Any]]:
    """Consecutive runs of ``examples`` whose serialized ``DatasetChunk`` stays within ``max_chunk_bytes``.

    An example larger than that goes alone. Every example lands in exactly one
    chunk, in order; no chunk is empty. Lazy: reads ``examples`` as it goes.
    """
    if max_chunk_bytes <= 0:
        raise ValueError("max_chunk_bytes must be positive")
    chunk: List[Any] = []
    size = 0
    for example in examples:
        n = example.ByteSize()
        field_size = 1 + _varint_size(n) + n
        if chunk and size + field_size > max_chunk_bytes:
            yield chunk
            chunk, size = [], 0
        chunk.append(example)
        size += field_size
    if chunk:
        yield chunk


def _varint_size(n: int) -> int:
    size = 1
    while n >= 0x80:
        n >>= 7
        size += 1
    return size


__all__ = [
    "parse_format",
    "parse_dataset",
    "read_dataset_file",
    "examples_from_rows",
    "example_from_mapping",
    "plan_chunks",
]
