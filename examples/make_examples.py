#!/usr/bin/env python3
"""Writes the small example datasets in examples/ (deterministic, seed 7).

sentiment_{train,validation}.csv: short product and service reviews, label
positive/negative. The label is carried by opinion phrases mixed into neutral
context, with 5% label noise, so a model must find the opinion words among
distractors. It is a walkthrough dataset for adapterctl, not a benchmark:
issue 5 adds real, third-party datasets for measuring quality.

topics_{train,validation}.csv: one-sentence questions labelled by topic
(sports, food, travel, technology).

Run: python3 examples/make_examples.py   (rewrites the CSV files)
"""
import csv
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
rng = random.Random(7)

SUBJECTS = ["the phone", "this camera", "the hotel", "our waiter", "the delivery", "the app", "this laptop",
            "the battery", "the room", "the food", "the support team", "the screen", "the price", "the seller",
            "the keyboard", "the service", "this book", "the movie", "the headphones", "the chair"]
POSITIVE = ["is excellent", "works great", "was wonderful", "is really good", "exceeded my expectations",
            "is amazing", "was a pleasure", "is fantastic value", "was friendly and quick", "is perfect",
            "made me happy", "is the best i have used", "was great", "is beautiful", "feels solid and reliable"]
NEGATIVE = ["is terrible", "stopped working", "was awful", "is really bad", "was a waste of money",
            "is broken", "was rude and slow", "is the worst i have used", "made me angry", "is poor quality",
            "was disappointing", "feels cheap", "failed after a week", "is useless", "was very late"]
CONTEXT = ["i bought it last month", "we stayed for two nights", "my friend recommended it",
           "it arrived on monday", "i used it every day", "we ordered for the whole family",
           "i read the reviews first", "it came in a blue box", "i paid with a card", "we went there in june",
           "the store was near my house", "i will tell my sister"]


def review(label):
    phrases = POSITIVE if label == "positive" else NEGATIVE
    parts = [f"{rng.choice(SUBJECTS)} {rng.choice(phrases)}"]
    for _ in range(rng.randint(0, 2)):
        parts.append(rng.choice(CONTEXT))
    if rng.random() < 0.4:
        parts.append(f"{rng.choice(SUBJECTS)} {rng.choice(phrases)}")
    rng.shuffle(parts)
    return (", ".join(parts) + rng.choice([".", "!", "."])).capitalize()


TOPICS = {
    "sports": ["who won the football game", "how many players are on a basketball team",
               "when does the tennis season start", "which team scored the most goals",
               "is the race on sunday", "where can i watch the match", "how long is a soccer game",
               "who is the best runner", "what time does the game start", "did our team win"],
    "food": ["how do i cook rice", "what is a good recipe for soup", "is this bread fresh",
             "where can i buy cheese", "how long should i bake the cake", "what wine goes with fish",
             "is the restaurant open for dinner", "how much sugar is in the sauce", "can i freeze the meat",
             "what fruit is in season"],
    "travel": ["how do i get to the airport", "is the train to london on time", "where is a cheap hotel",
               "do i need a passport for this trip", "what is the best beach near the city",
               "how long is the flight", "can i change my ticket", "which bus goes to the museum",
               "is the hotel near the station", "what should i pack for the mountains"],
    "technology": ["how do i reset my phone", "why is my computer slow", "what is the best laptop for school",
                   "how do i connect to the network", "can i update the software", "why does the app crash",
                   "how much memory does this computer have", "is the new phone worth it",
                   "how do i back up my files", "what screen size should i buy"],
}
OPENERS = ["", "please tell me ", "quick question: ", "does anyone know ", "i wonder ", "help: "]


def question(topic):
    return (rng.choice(OPENERS) + rng.choice(TOPICS[topic]) + "?").capitalize()


def write(name, rows, header):
    with open(os.path.join(HERE, name), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def noisy(label, labels):
    return rng.choice([l for l in labels if l != label]) if rng.random() < 0.05 else label


def main():
    for split, n in (("train", 400), ("validation", 100)):
        rows = []
        for i in range(n):
            label = ("positive", "negative")[i % 2]
            rows.append((review(label), noisy(label, ["positive", "negative"])))
        rng.shuffle(rows)
        write(f"sentiment_{split}.csv", rows, ["text", "label"])
    topics = sorted(TOPICS)
    for split, n in (("train", 400), ("validation", 100)):
        rows = [(question(topics[i % 4]), topics[i % 4]) for i in range(n)]
        rng.shuffle(rows)
        write(f"topics_{split}.csv", rows, ["text", "label"])


if __name__ == "__main__":
    main()
