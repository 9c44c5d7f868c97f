"""`bertforge predict`: the input formats fine-tuning reads, records in input order, one-line errors; and the
`features` flags."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from bertforge.cli import main
from bertforge.tasks.predictor import Predictor
from predictor_folders import tiny_predictor

SENTENCES = ["A gripping , funny film .", "it 's a bore", "Not bad at all", "the plot goes nowhere , slowly",
             "An unexpected delight ."]
PAIRS = [("A man is playing.", "Someone plays."), ("It rains.", "The sun shines brightly."),
         ("Cats sleep.", "Dogs bark loudly at night.")]


@pytest.fixture(scope="module")
def sst2(tmp_path_factory, minilm_dir) -> Path:
    return tiny_predictor(tmp_path_factory.mktemp("sst2"), minilm_dir, "sst2", "sequence_classification",
                          ["0", "1"], seed=2)


@pytest.fixture(scope="module")
def reference(sst2):
    return Predictor.load(sst2, device="cpu", precision="fp32")


def _predict(capsys, *argv) -> tuple[list[dict], str]:
    assert main(["predict", *map(str, argv)]) == 0
    out = capsys.readouterr()
    return [json.loads(line) for line in out.out.splitlines()], out.err


def test_txt_input_to_stdout_is_the_predictor_records_in_order(sst2, reference, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("\n".join(SENTENCES) + "\n\n", encoding="utf-8")
    rows, err = _predict(capsys, "--model", sst2, "--input", tmp_path / "in.txt", "--device", "cpu",
                         "--max-batch-tokens", "20", "--batch-size", "2")
    want = reference.predict(SENTENCES)  # one batch; the CLI ran 3 batches of other shapes
    assert [r["label"] for r in rows] == [w["label"] for w in want]
    assert [r["scores"]["1"] for r in rows] == pytest.approx([w["scores"]["1"] for w in want], abs=1e-6)
    assert "5 examples in" in err and "examples/s" in err


@pytest.mark.parametrize("name, content", [
    ("in.csv", 'sentence,label\n"A gripping , funny film .",1\nit \'s a bore,0\n'),
    ("in.tsv", "sentence\tlabel\nA gripping , funny film .\t1\nit 's a bore\t0\n"),
    ("in.jsonl", '{"text": "A gripping , funny film ."}\n{"text": "it \'s a bore", "label": 0}\n'),
])
def test_table_inputs_read_like_finetune_data(sst2, reference, tmp_path, capsys, name, content):
    (tmp_path / name).write_text(content, encoding="utf-8")
    rows, _ = _predict(capsys, "--model", sst2, "--input", tmp_path / name)
    assert rows == json.loads(json.dumps(reference.predict(SENTENCES[:2])))


def test_named_pair_columns_and_csv_output(sst2, reference, tmp_path, capsys):
    with open(tmp_path / "pairs.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "premise", "hypothesis"])
        writer.writerows([i, a, b] for i, (a, b) in enumerate(PAIRS))
    out = tmp_path / "preds.csv"
    assert main(["predict", "--model", str(sst2), "--input", str(tmp_path / "pairs.csv"), "--text-column", "premise",
                 "--text-pair-column", "hypothesis", "--output", str(out)]) == 0
    assert capsys.readouterr().out == ""
    with open(out, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    want = reference.predict(PAIRS)
    assert list(rows[0]) == ["label", "score", "scores.0", "scores.1"]
    assert [r["label"] for r in rows] == [w["label"] for w in want]
    assert [float(r["scores.1"]) for r in rows] == pytest.approx([w["scores"]["1"] for w in want], abs=1e-12)


def test_jsonl_output_file(sst2, reference, tmp_path, capsys):
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": a, "text_pair": b}) + "\n" for a, b in PAIRS))
    assert main(["predict", "--model", str(sst2), "--input", str(tmp_path / "in.jsonl"),
                 "--output", str(tmp_path / "out.jsonl")]) == 0
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert rows == json.loads(json.dumps(reference.predict(PAIRS)))


@pytest.mark.parametrize("name, content, message", [
    ("bad.jsonl", '{"text": "fine"}\n{"txt": "typo"}\n', "bad.jsonl, line 2, field 'text': expected a string"),
    ("bad.jsonl", '{"text": "fine"}\n{"text": "x"\n', "bad.jsonl, line 2: expected one JSON object per line"),
    ("bad.csv", "body\nhello\n", "bad.csv, line 1, field 'text'"),
    ("bad.tsv", "text\tother\nhello\n", "bad.tsv, line 2, field 'other': expected 2 fields"),
    ("bad.csv", "text,label,text\na,1,b\n", "bad.csv, line 1, field 'text': expected each column name once"),
])
def test_bad_input_is_one_line_naming_file_line_and_field(sst2, tmp_path, capsys, name, content, message):
    (tmp_path / name).write_text(content, encoding="utf-8")
    assert main(["predict", "--model", str(sst2), "--input", str(tmp_path / name)]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err and message in err
    assert "--skip-bad-rows" not in err  # predict answers every input in order: it has no such flag


def test_max_chars_is_in_help_and_cuts_long_lines(sst2, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["predict", "--help"])
    assert "--max-chars" in capsys.readouterr().out
    (tmp_path / "long.txt").write_text("good " * 2000 + "\nshort\n")
    rows, _ = _predict(capsys, "--model", sst2, "--input", tmp_path / "long.txt", "--max-chars", "1000")
    assert rows[0]["truncated"] is True and "truncated" not in rows[1]


def test_features_layers_out_of_range_names_flag_and_layer_count(sst2, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("EU rejects German call .\n")
    assert main(["features", "--model", str(sst2), "--input", str(tmp_path / "in.txt"), "--layers", "99",
                 "--output", str(tmp_path / "f.safetensors")]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--layers 99: the model has 2 layers" in err
    assert not (tmp_path / "f.safetensors").exists()


@pytest.mark.slow
@pytest.mark.parametrize("verb", ["predict", "features"])
def test_a_5mb_line_is_cut_before_tokenization_and_bounded(sst2, tmp_path, capsys, monkeypatch, verb):
    import tracemalloc
    from bertforge.tokenization import load_tokenizer
    line = "a long , long review that never ends " * (5_000_000 // 38)
    (tmp_path / "big.txt").write_text(line + "\nshort one\n", encoding="utf-8")
    out = tmp_path / ("out.jsonl" if verb == "predict" else "out.safetensors")
    seen: list[int] = []  # characters of every input the tokenizer is given (a text, or a list of words)
    cls = type(load_tokenizer(sst2))
    tokenize = cls.__call__

    def recording(self, text, text_pair=None, **kwargs):
        for item in [text] if isinstance(text, str) or kwargs.get("is_split_into_words") and text and \
                isinstance(text[0], str) else text:
            seen.append(len(item) if isinstance(item, str) else sum(map(len, item)))
        return tokenize(self, text, text_pair, **kwargs)
    monkeypatch.setattr(cls, "__call__", recording)
    tracemalloc.start()
    extra = ["--layers", "-1,-2"] if verb == "features" else []  # the tiny model has 2 layers
    assert main([verb, "--model", str(sst2), "--input", str(tmp_path / "big.txt"), "--output", str(out), *extra]) == 0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert seen and max(seen) <= 100_000, "the tokenizer never sees more than --max-chars characters of a line"
    assert peak < 100 * 2**20  # the line itself is 5 MB; nothing grows with it beyond that
    err = capsys.readouterr().err
    if verb == "predict":
        rows = [json.loads(r) for r in out.read_text().splitlines()]
        assert len(rows) == 2 and rows[0]["truncated"] is True
    else:
        assert "1 lines cut at 100,000 characters" in err


def test_qa_and_ner_inputs(tmp_path, minilm_dir, capsys):
    from bertforge.tasks import CONLL2003_LABELS
    qa = tiny_predictor(tmp_path / "qa", minilm_dir, "squad", "question_answering")
    context = "The Eiffel Tower was finished in 1889 in Paris."
    (tmp_path / "qa.csv").write_text(f'question,context\nWhen was it finished?,"{context}"\n')
    (tmp_path / "qa.jsonl").write_text(json.dumps({"question": "When was it finished?", "context": context}) + "\n")
    want = Predictor.load(qa).predict([("When was it finished?", context)])
    for name in ("qa.csv", "qa.jsonl"):
        rows, _ = _predict(capsys, "--model", qa, "--input", tmp_path / name)
        assert rows == json.loads(json.dumps(want)) and context[rows[0]["start"]:rows[0]["end"]] == rows[0]["answer"]
    ner = tiny_predictor(tmp_path / "ner", minilm_dir, "conll2003", "token_classification", list(CONLL2003_LABELS))
    (tmp_path / "ner.jsonl").write_text('{"words": ["Peter", "Blackburn"]}\n{"text": "EU rejects German call ."}\n')
    rows, _ = _predict(capsys, "--model", ner, "--input", tmp_path / "ner.jsonl")
    want = Predictor.load(ner).predict([["Peter", "Blackburn"], "EU rejects German call ."])
    assert rows == json.loads(json.dumps(want)) and rows[1]["words"] == ["EU", "rejects", "German", "call", "."]
    (tmp_path / "ner.jsonl").write_text('{"words": ["Peter"]}\n{"words": "Peter Blackburn"}\n')
    assert main(["predict", "--model", str(ner), "--input", str(tmp_path / "ner.jsonl")]) == 1
    assert "ner.jsonl, line 2, field 'words': expected a list, got str" in capsys.readouterr().err


def test_parquet_and_datasets_inputs_read_like_finetune_data(sst2, reference, tmp_path, capsys):
    from needs import require_module
    pa = require_module("pyarrow", "pip install 'bertforge[data]'")
    import pyarrow.parquet as pq
    datasets = require_module("datasets")
    columns = {"sentence": SENTENCES[:3], "label": [1, 0, 1]}
    pq.write_table(pa.table(columns), tmp_path / "in.parquet")
    datasets.Dataset.from_dict(columns).save_to_disk(str(tmp_path / "saved"))
    for given in (tmp_path / "in.parquet", tmp_path / "saved"):
        rows, _ = _predict(capsys, "--model", sst2, "--input", given)
        assert rows == json.loads(json.dumps(reference.predict(SENTENCES[:3])))


def test_long_input_flags_reach_the_predictor(sst2, tmp_path, capsys):
    """--long-inputs / --max-seq-length are `LongInputOptions`: chunked records are the library's chunked records
    (not the truncated ones), and refuse stops at the first long input."""
    from bertforge.tasks.long_inputs import LongInputOptions
    long_text = " ".join(SENTENCES * 4)
    (tmp_path / "long.txt").write_text(long_text + "\n", encoding="utf-8")
    rows, _ = _predict(capsys, "--model", sst2, "--input", tmp_path / "long.txt", "--device", "cpu",
                       "--max-seq-length", "16", "--long-inputs", "chunk", "--chunk-stride", "8")
    chunked = Predictor.load(sst2, device="cpu", precision="fp32", long_inputs=LongInputOptions(
        max_seq_length=16, long_inputs="chunk", chunk_stride=8)).predict([long_text])
    cut = Predictor.load(sst2, device="cpu", precision="fp32", long_inputs=LongInputOptions(
        max_seq_length=16)).predict([long_text])
    assert chunked[0]["scores"] != cut[0]["scores"]  # the two modes differ on this input
    assert rows[0]["scores"] == pytest.approx(chunked[0]["scores"], abs=1e-5)
    assert main(["predict", "--model", str(sst2), "--text", long_text, "--device", "cpu", "--max-seq-length", "16",
                 "--long-inputs", "refuse"]) == 1
    assert "(with --long-inputs refuse)" in capsys.readouterr().err
