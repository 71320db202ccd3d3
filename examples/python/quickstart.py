#!/usr/bin/env python3
"""adapterd from Python: upload, train with a progress bar, predict; a classification task and a QA task.

Start a server first (./scripts/run.sh), install the client (pip install ./client/python), then:

    python3 examples/python/quickstart.py [--server 127.0.0.1:8500] [--epochs 3]

With an API key: --api-key KEY or ADAPTERD_API_KEY. Exit status 0 when both
tasks trained and answered.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import adapterd

EXAMPLES = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default="127.0.0.1:8500")
    parser.add_argument("--api-key", default=None, help="default: $ADAPTERD_API_KEY")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()

    with adapterd.Client(args.server, api_key=args.api_key) as client:
        print("server:", client.health())

        # 1. Sequence classification: upload the data explicitly, then train on the dataset ids.
        train = client.upload_dataset(EXAMPLES / "sentiment_train.csv", task_id="quickstart-sentiment")
        validation = client.upload_dataset(EXAMPLES / "sentiment_validation.csv", task_id="quickstart-sentiment")
        print(f"uploaded {train.dataset_id} ({train.num_examples} examples, labels {dict(train.label_counts)})")
        job = client.train(
            "quickstart-sentiment",
            train,
            validation_dataset=validation,
            epochs=args.epochs,
            learning_rate=1e-3,
            progress=True,  # a live progress line on stderr
        )
        print(f"trained version {job.result_version}: {job.best_metrics.describe()}")
        for text, p in zip(
            ["great and fast, I love it", "broken, rude and slow"],
            client.predict(
                "quickstart-sentiment", ["great and fast, I love it", "broken, rude and slow"], return_all_scores=True
            ),
        ):
            print(f"  {text!r}: {p.label} ({p.score:.3f}); all: {p.scores}")

        # 2. Extractive QA: train() uploads a SQuAD file itself (under a content-derived id).
        job = client.train(
            "quickstart-bios",
            EXAMPLES / "kinds" / "biographies_train.json",
            validation_dataset=EXAMPLES / "kinds" / "biographies_validation.json",
            kind="qa",
            epochs=args.epochs,
            learning_rate=1e-3,
            progress=True,
        )
        print(f"trained version {job.result_version}: {job.best_metrics.describe()}")
        context = "Ada Lovelace was born in London in 1815. Ada became a mathematician."
        result = client.predict("quickstart-bios", "Where was Ada Lovelace born?", contexts=context, top_k=2)
        for answer in result[0].answers:
            shown = "(no answer)" if answer.is_no_answer else repr(answer.text)
            print(f"  answer {shown} at [{answer.start}, {answer.end}) score {answer.score:.3f}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except adapterd.AdapterdError as error:
        print(f"quickstart: {error}", file=sys.stderr)
        sys.exit(1)
