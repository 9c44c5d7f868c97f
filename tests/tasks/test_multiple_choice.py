"""SWAG-style multiple choice end to end on a tiny hand-made set in the swagaf CSV layout."""
from __future__ import annotations

import csv

import pytest

from bertforge.tasks.finetune import FinetuneSettings, finetune
from bertforge.tasks.predictor import Predictor

ROWS = [
    ("A man sits down at the piano.", "He", "begins to play a song.", "eats the piano.", "flies to the moon.",
     "turns into a cat.", 0),
    ("The woman pours water into a glass.", "She", "throws the sky away.", "drinks the water.", "melts the table.",
     "sings to the floor.", 1),
    ("A boy kicks the ball toward the goal.", "The ball", "becomes a bird.", "reads a book.", "goes into the net.",
     "cooks dinner.", 2),
    ("The chef chops onions on the board.", "He", "swims in the pan.", "paints the onions blue.", "eats the knife.",
     "puts them in the pot.", 3),
]


@pytest.fixture()
def swag_csv(tmp_path):
    path = tmp_path / "train.csv"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        w = csv.writer(handle)
        w.writerow(["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
                    "ending0", "ending1", "ending2", "ending3", "label"])
        for i, (s1, s2, e0, e1, e2, e3, label) in enumerate(ROWS * 2):
            w.writerow([i, f"v{i}", i, f"{s1} {s2}", s1, s2, "gold", e0, e1, e2, e3, label])
    return path


@pytest.mark.slow
def test_swag_head_learns_and_predicts(swag_csv, minilm_dir, tmp_path):
    """No SWAG data is available offline, so the hand-made set stands in: from the real all-MiniLM-L6-v2 weights
    the new head starts near chance (0.25-0.5 on these rows, checked by hand with lr 1e-12) and fits them after
    six steps. A softmax over choices mixed up across examples or a misread label column could not."""
    report = finetune(FinetuneSettings(task="swag", model=str(minilm_dir), output=str(tmp_path / "o"),
                                       train_file=str(swag_csv), eval_file=str(swag_csv), epochs=3, batch_size=4,
                                       learning_rates=[1e-4], max_seq_length=48, progress=False), say=lambda *_: None)
    assert report.eval["accuracy"] == 1.0 and report.eval["n_examples"] == 8
    p = Predictor.load(tmp_path / "o")
    r = p.predict([("A man sits down at the piano.", "He", ["plays.", "eats.", "flies.", "sleeps."]),
                   ("Context only.", ["a", "b", "c"])])
    assert len(r[0]["scores"]) == 4 and len(r[1]["scores"]) == 3
    assert abs(sum(r[0]["scores"]) - 1) < 1e-6 and r[0]["label"] in range(4)
    # each choice is scored on its own: permuting the endings permutes the scores
    context, start, endings = ROWS[1][0], ROWS[1][1], list(ROWS[1][2:6])
    order = [2, 0, 3, 1]
    plain, permuted = p.predict([(context, start, endings), (context, start, [endings[i] for i in order])])
    assert plain["label"] == 1 and permuted["label"] == order.index(1)
    for k, i in enumerate(order):
        assert abs(permuted["scores"][k] - plain["scores"][i]) < 1e-5
