"""The dataset reader (adapterd.datasets), the port of common/dataset_file.h, without a server."""

from __future__ import annotations

import pytest

from adapterd import InvalidArgument
from adapterd.datasets import examples_from_rows, parse_dataset, plan_chunks, read_dataset_file
from adapterd._stubs import pb
from conftest import EXAMPLES


def parse(contents: str, name: str = "data.jsonl", format=None):
    return list(parse_dataset(contents.encode(), name, format))


def error_of(contents, name="data.jsonl", format=None) -> str:
    with pytest.raises(InvalidArgument) as info:
        list(parse_dataset(contents.encode() if isinstance(contents, str) else contents, name, format))
    return info.value.message


def test_csv_quotes_pairs_labels_and_line_numbers():
    text = '\ufefftext , text_pair,label,labels\n"a, ""quoted""\ntext",b,x,"p | q"\n\r\nplain,,y,\n'
    rows = parse(text, "d.csv")
    assert [r.text for r in rows] == ['a, "quoted"\ntext', "plain"]
    assert rows[0].text_pair == "b" and rows[0].label == "x" and list(rows[0].labels) == ["p", "q"]
    assert list(rows[1].labels) == []
    # The third record starts on line 5 (the quoted field spans lines 2-3, line 4 is empty).
    assert error_of("text,label\n\"a\nb\",x\n\nc,\n", "d.csv") == "d.csv: line 5: empty label"
    assert "line 2: quote inside an unquoted field" in error_of('text,label\nab"c,x\n', "d.csv")
    assert "line 2: unterminated quoted field" in error_of('text,label\n"abc,x\n', "d.csv")
    assert "expected 2 fields" in error_of("text,label\na,b,c\n", "d.csv")
    assert "empty label in labels 'a||b'" in error_of("text,labels\nt,a||b\n", "d.csv")
    assert "unknown column 'tokens'" in error_of("text,tokens\nt,a\n", "d.csv")
    assert "JSON Lines or SQuAD JSON" in error_of("text,tokens\nt,a\n", "d.csv")
    assert error_of("text,label\n", "d.csv") == "d.csv: no examples after the header row"


def test_jsonl_members_of_every_kind():
    rows = parse(
        "\n".join(
            [
                '{"text": "a", "label": 3}',
                '{"text": "b", "label": 3.25, "id": "ignored"}',
                '{"text": "c", "labels": ["x", 2]}',
                '{"tokens": ["Ada", "ran"], "tags": ["B-PER", "O"]}',
                '{"text": "Ada ran", "entities": [{"start": 0, "end": 3, "label": "PER"}]}',
                '{"question": "Who?", "context": "Ada ran", "answers": [{"text": "Ada", "answer_start": 0}]}',
                '{"question": "Why?", "context": "Ada ran", "answers": [], "is_impossible": true}',
                "",
            ]
        )
    )
    assert [r.label for r in rows[:2]] == ["3", "3.25"]
    assert list(rows[2].labels) == ["x", "2"]
    assert list(rows[3].tokens) == ["Ada", "ran"] and list(rows[3].tags) == ["B-PER", "O"] and rows[3].text == ""
    assert [(e.start, e.end, e.label) for e in rows[4].entities] == [(0, 3, "PER")]
    assert rows[5].text == "Who?" and rows[5].text_pair == "Ada ran"
    assert [(a.text, a.answer_start) for a in rows[5].answers] == [("Ada", 0)]
    assert len(rows[6].answers) == 0


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"text": "a"}', 'line 1: missing key "label"'),
        ('{"label": "x"}', 'line 1: missing key "text"'),
        ('{"text": "a", "label": true}', '"label" must be a string or a number, got boolean'),
        ('{"text": "a", "label": ""}', "line 1: empty label"),
        ('{"text": "", "label": "x"}', "line 1: empty text"),
        ('{"text": null, "label": "x"}', '"text" must be a string, got null'),
        ('{"tokens": ["a"], "tags": ["O", "O"]}', '"tokens" has 1 elements but "tags" has 2'),
        ('{"tokens": ["a"]}', '"tokens" without "tags"'),
        ('{"text": "a", "entities": [{"start": 3, "end": 1, "label": "X"}]}',
         "entities[0]: start 3 is not before end 1"),
        ('{"text": "a", "entities": [{"start": -3, "end": 1, "label": "X"}]}', "entities[0].start is negative (-3)"),
        ('{"question": "q", "context": "c"}', 'missing key "answers"'),
        ('{"question": "q", "text": "t", "answers": []}', "cannot be combined"),
        ('{"question": "q", "context": "c", "answers": [], "is_impossible": false}', "is_impossible\" is false"),
        ("[1, 2]", "expected a JSON object, got array"),
        ("{not json}", "line 1: invalid JSON"),
    ],
)
def test_jsonl_errors_name_the_line_and_rule(line, message):
    assert message in error_of(line)


def test_jsonl_error_line_numbers_count_blank_lines():
    assert error_of('{"text": "a", "label": "x"}\n\n{"text": "b"}\n').startswith("data.jsonl: line 3: ")


def test_invalid_utf8_is_named_by_line():
    data = b'{"text": "a", "label": "x"}\n{"text": "\xff", "label": "x"}\n'
    assert error_of(data) == "data.jsonl: line 2: invalid UTF-8"


def test_squad_file_and_detection():
    doc = (
        '{"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": "Ada ran.", "qas": ['
        '{"id": "1", "question": "Who ran?", "answers": [{"text": "Ada", "answer_start": 0}]},'
        '{"id": "2", "question": "Why?", "answers": [], "is_impossible": true, "plausible_answers": []}]}]}]}'
    )
    for name in ("train.json", "train.txt"):  # .json and an unknown extension: SQuAD by content
        rows = parse(doc, name)
        assert [r.text for r in rows] == ["Who ran?", "Why?"]
        assert all(r.text_pair == "Ada ran." for r in rows)
    broken = doc.replace('"question": "Why?", ', "")
    assert error_of(broken, "train.json") == 'train.json: data[0].paragraphs[0].qas[1]: missing key "question"'
    # Unknown extensions: CSV unless the content starts with '{'.
    assert parse("text,label\na,b\n", "data.txt")[0].label == "b"
    assert parse('{"text": "a", "label": "b"}', "data")[0].label == "b"
    assert "the file is empty" in error_of("  \n", "x.csv")
    with pytest.raises(InvalidArgument, match="unknown dataset format"):
        parse("x", "x", format="xml")


def test_every_example_file_reads():
    for path in sorted(EXAMPLES.glob("*.csv")) + sorted((EXAMPLES / "kinds").glob("*.*")):
        if path.suffix not in (".csv", ".jsonl", ".json"):
            continue
        examples = list(read_dataset_file(path))
        assert examples, path


def test_rows_take_dicts_and_examples_and_name_the_row():
    rows = list(examples_from_rows([{"text": "a", "label": "x"}, pb.Example(text="b", label="y")]))
    assert [r.text for r in rows] == ["a", "b"]
    with pytest.raises(InvalidArgument, match=r"rows: row 2: missing key \"label\""):
        list(examples_from_rows([{"text": "a", "label": "x"}, {"text": "b"}]))
    with pytest.raises(InvalidArgument, match="no examples"):
        list(examples_from_rows([]))


def test_plan_chunks_bounds_every_chunk_and_keeps_order():
    examples = [pb.Example(text="x" * n, label="l") for n in (10, 200, 10, 10, 5000, 10)]
    chunks = list(plan_chunks(iter(examples), 300))
    assert [e for chunk in chunks for e in chunk] == examples
    for chunk in chunks:
        size = pb.DatasetChunk(examples=chunk).ByteSize()
        assert size <= 300 or len(chunk) == 1
    assert [len(c) for c in chunks] == [4, 1, 1]  # 259 bytes fit in 300; 5000 goes alone
