#!/usr/bin/env python3
"""Writes the walkthrough datasets of the task kinds in examples/kinds/
(deterministic, seed 31): small, generated from templates, for trying each
kind with adapterctl (README, "Every kind of task") and for the end-to-end
tests. They are not benchmarks: examples/REAL_DATASETS.md lists the real
datasets quality is measured on.

- aspects_{train,validation}.jsonl (multi-label classification): product
  reviews; `labels` names every aspect a review talks about (price, quality,
  delivery, service), one to three per review.
- ratings_{train,validation}.csv (regression): reviews with a 1-5 star
  rating in `label`, the mean of the opinions the review states, each
  opinion phrase carrying a score.
- people_{train,validation}.jsonl (token classification): sentences about
  people, the places they went and the organisations they worked for, PER /
  LOC / ORG entities. The training file mixes both formats: pre-split
  `tokens` and `tags` (IOB2), and a `text` with `entities` (code-point
  offsets); validation uses `text` and `entities`.
- biographies_{train,validation}.json (extractive QA): short biographies as
  a SQuAD v2.0 JSON file, questions about birthplace, birth year, work and
  employer; one question in ten has no answer in its paragraph.

Run: python3 examples/make_kind_examples.py   (rewrites examples/kinds/)
"""
import csv
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "kinds")
rng = random.Random(31)

ASPECTS = {
    "price": ["the price was fair", "it cost far too much", "good value for the money", "it was cheap",
              "the price went up twice"],
    "quality": ["the build quality is solid", "it broke after a week", "the materials feel premium",
                "the stitching came apart", "it is well made"],
    "delivery": ["delivery took three weeks", "it arrived the next day", "the parcel came damaged",
                 "shipping was quick", "the courier lost it at first"],
    "service": ["support answered within an hour", "the staff were rude", "customer service replaced it",
                "nobody answered my emails", "the seller was very helpful"],
}
FILLER = ["i bought it for my brother", "we use it in the kitchen", "it is blue", "i ordered two",
          "my neighbour has the same one", "it came in a small box"]

# Opinion phrases and their star ratings (regression).
OPINIONS = [("absolutely love it", 5.0), ("works perfectly", 5.0), ("very happy with it", 4.5),
            ("pretty good overall", 4.0), ("does the job", 3.5), ("it is okay", 3.0),
            ("a bit disappointing", 2.5), ("not worth it", 2.0), ("quite bad", 1.5),
            ("complete waste of money", 1.0), ("stopped working at once", 1.0)]

PEOPLE = ["Ada Lovelace", "Alan Turing", "Grace Hopper", "Marie Curie", "Nikola Tesla", "Emmy Noether",
          "Katherine Johnson", "Tim Berners-Lee", "Hedy Lamarr", "Claude Shannon", "Rosalind Franklin",
          "Linus Torvalds", "Margaret Hamilton", "Dennis Ritchie", "Barbara Liskov", "Ken Thompson"]
PLACES = ["London", "Paris", "Vienna", "Boston", "New York", "Zürich", "Helsinki", "Geneva", "Princeton",
          "Cambridge", "Berlin", "Kraków", "San Francisco", "Tokyo"]
ORGS = ["Bell Labs", "the Royal Society", "NASA", "CERN", "IBM", "the University of Göttingen", "MIT",
        "the Navy", "Microsoft", "the BBC"]
TAGGING_TEMPLATES = [
    "{per} moved to {loc} in the spring .",
    "{per} worked for {org} for many years .",
    "In {loc} , {per} joined {org} .",
    "{org} hired {per} after a visit to {loc} .",
    "The letter from {per} reached {loc} late .",
    "{per} gave a talk at {org} in {loc} .",
    "Nobody in {loc} had heard of {org} then .",
]

JOBS = ["mathematician", "engineer", "physicist", "chemist", "programmer", "astronomer", "inventor"]
YEARS = list(range(1815, 1990))


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def aspects(n):
    rows = []
    for _ in range(n):
        chosen = rng.sample(sorted(ASPECTS), rng.randint(1, 3))
        parts = [rng.choice(ASPECTS[a]) for a in chosen] + rng.sample(FILLER, rng.randint(0, 2))
        rng.shuffle(parts)
        rows.append({"text": ", ".join(parts), "labels": sorted(chosen)})
    return rows


def ratings(n):
    rows = []
    for _ in range(n):
        chosen = rng.sample(OPINIONS, rng.randint(1, 2))
        parts = [p for p, _ in chosen] + rng.sample(FILLER, rng.randint(0, 2))
        rng.shuffle(parts)
        stars = sum(s for _, s in chosen) / len(chosen)
        rows.append({"text": ", ".join(parts), "label": f"{stars:g}"})
    return rows


def tagged_sentence():
    """(tokens, tags) of one templated sentence (IOB2)."""
    template = rng.choice(TAGGING_TEMPLATES)
    fills = {"per": (rng.choice(PEOPLE), "PER"), "loc": (rng.choice(PLACES), "LOC"), "org": (rng.choice(ORGS), "ORG")}
    tokens, tags = [], []
    for word in template.split(" "):
        if word.startswith("{") and word.endswith("}"):
            name, kind = fills[word[1:-1]]
            for i, part in enumerate(name.split(" ")):
                tokens.append(part)
                tags.append(("B-" if i == 0 else "I-") + kind)
        else:
            tokens.append(word)
            tags.append("O")
    return tokens, tags


def as_entities(tokens, tags):
    """The same sentence as text + entities (code-point offsets)."""
    text, entities, at = "", [], 0
    for i, (token, tag) in enumerate(zip(tokens, tags)):
        if i:
            text += " "
            at += 1
        if tag.startswith("B-"):
            entities.append({"start": at, "end": at + len(token), "label": tag[2:]})
        elif tag.startswith("I-"):
            entities[-1]["end"] = at + len(token)
        text += token
        at += len(token)
    return {"text": text, "entities": entities}


def people(n, mixed):
    rows = []
    for i in range(n):
        tokens, tags = tagged_sentence()
        rows.append({"tokens": tokens, "tags": tags} if mixed and i % 2 == 0 else as_entities(tokens, tags))
    return rows


def biographies(n, prefix):
    paragraphs = []
    for i in range(n):
        name, place, org, job = rng.choice(PEOPLE), rng.choice(PLACES), rng.choice(ORGS), rng.choice(JOBS)
        year = rng.choice(YEARS)
        sentences = [f"{name} was born in {place} in {year}.", f"{name.split(' ')[0]} became a {job}.",
                     f"Later {name.split(' ')[-1]} worked for {org}.", rng.choice(FILLER).capitalize() + "."]
        context = " ".join(sentences)
        facts = {"Where was {} born?": place, "In which year was {} born?": str(year),
                 "What did {} become?": job, "Who did {} work for?": org}
        qas = []
        for j, (question, answer) in enumerate(facts.items()):
            qa = {"id": f"{prefix}-{i}-{j}", "question": question.format(name)}
            if rng.random() < 0.1:  # a question about someone else: no answer here
                qa["question"] = question.format(rng.choice([p for p in PEOPLE if p != name]))
                qa.update({"answers": [], "is_impossible": True})
            else:
                qa.update({"answers": [{"text": answer, "answer_start": context.index(answer)}],
                           "is_impossible": False})
            qas.append(qa)
        paragraphs.append({"context": context, "qas": qas})
    return {"version": "v2.0", "data": [{"title": "Biographies", "paragraphs": paragraphs}]}


def main():
    os.makedirs(OUT, exist_ok=True)
    write_jsonl(os.path.join(OUT, "aspects_train.jsonl"), aspects(240))
    write_jsonl(os.path.join(OUT, "aspects_validation.jsonl"), aspects(60))
    for name, n in (("train", 240), ("validation", 60)):
        with open(os.path.join(OUT, f"ratings_{name}.csv"), "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=["text", "label"])
            w.writeheader()
            w.writerows(ratings(n))
    write_jsonl(os.path.join(OUT, "people_train.jsonl"), people(240, mixed=True))
    write_jsonl(os.path.join(OUT, "people_validation.jsonl"), people(60, mixed=False))
    for name, n in (("train", 250), ("validation", 30)):
        with open(os.path.join(OUT, f"biographies_{name}.json"), "w", encoding="utf-8") as f:
            json.dump(biographies(n, name), f, ensure_ascii=False, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
