"""experiments/generation_infill.py --records: the two documented runs (100 sentences with every method, then 400
with Mask-Predict and left to right) write the published group generation-infill, record for record, on the real
corpus and the real MiniLM tokenizer; only the MLM is a stand-in whose fills the test knows."""
from __future__ import annotations

import functools
import json

import pytest

from needs import require_path
from published_records import assert_published

import generation_infill as gi  # noqa: E402

def right_case(seed: int, iterations: int) -> bool:
    return (seed + iterations) % 5 != 0


PREFIXES = tuple(f"generation-infill/{part}/" for part in ("methods", "span-length", "time", "mh"))  # not mlm-phase*


def right_limit(sampler: str) -> int:
    """The stand-in fills spans up to this many pieces right (on four cases of five, which ones depending on the
    method's iterations), else only their first piece (so a 1-piece span always): span match 0 for the longer
    spans, as in the published span-length table."""
    return 3 if sampler == "left-to-right" else 2


@pytest.mark.slow
def test_the_documented_runs_write_the_published_records(shared_data, minilm_dir, tmp_path, monkeypatch):
    from bertforge.results_store import read_store
    from bertforge.tokenization.auto import load_tokenizer
    corpus = require_path(shared_data / "corpus" / "wikipedia-en-2018" / "wiki_en.txt.xz", "the Wikipedia corpus")
    tokenizer = load_tokenizer(minilm_dir)  # all-MiniLM-L6-v2's vocabulary: the published model's
    truths: dict[str, list[str]] = {}   # masked text -> the pieces under the masks, as the script made them
    lengths: list[int] = []              # the spans of the current run, in order

    def spied_mask_span(tok, sentence, rng):
        masked, truth = real_mask_span(tok, sentence, rng)
        truths[gi.pieces_to_text(tok, masked)] = truth
        lengths.append(len(truth))
        return masked, truth

    def stand_in(model, tok, text, seed, sampler, **options):
        truth = truths[text]
        right = len(truth) <= right_limit(sampler) and right_case(seed, options.get("iterations", 0))
        tokens = list(truth) if right else truth[:1] + ["[UNK]"] * (len(truth) - 1)
        out = {"tokens": tokens, "text": text}
        return [{**out, "acceptance_rate": 0.61} if sampler == "mh" else out]

    real_mask_span = gi.mask_span
    monkeypatch.setattr(gi, "mask_span", spied_mask_span)
    monkeypatch.setattr(gi, "generate", stand_in)
    monkeypatch.setattr(gi, "load_mlm", lambda path: (None, tokenizer))
    monkeypatch.setattr(gi, "last_articles", functools.cache(gi.last_articles))  # both runs read the corpus once
    store = tmp_path / "store"
    common = ["--model", "minilm-wiki2", "--corpus", str(corpus), "--articles", "300", "--records", str(store)]
    gi.main([*common, "--sentences", "100", "--out", str(tmp_path / "infill.json")])
    lengths_100, lengths[:] = list(lengths), []
    gi.main([*common, "--sentences", "400", "--out", str(tmp_path / "infill400.json"), "--methods",
             "mask-predict T=1,mask-predict T=2,mask-predict T=4,mask-predict T=10,left-to-right (greedy)"])
    run_100 = json.loads((tmp_path / "infill.json").read_text())
    run_400 = json.loads((tmp_path / "infill400.json").read_text())
    # the sentences and spans follow from the corpus, the tokenizer and the seed: the published counts
    assert (run_100["sentences"], run_100["masked_pieces"]) == (100, 244) == (len(lengths_100), sum(lengths_100))
    assert (run_400["sentences"], run_400["masked_pieces"]) == (400, 982) == (len(lengths), sum(lengths))

    written = assert_published(store, *PREFIXES)
    published = read_store()
    assert {name: read_store(store).tables[name] for name in gi.TABLES} == {
        name: published.tables[name] for name in gi.TABLES}
    for record in written.values():
        assert record.data == ("sentences of 12-40 pieces from the last 300 articles of "
                               "../shared/data/corpus/wikipedia-en-2018/wiki_en.txt.xz, one span of 1-4 pieces masked")
        assert record.command.startswith("python experiments/generation_infill.py --model minilm-wiki2 --corpus "
                                         "../shared/data/corpus/wikipedia-en-2018/wiki_en.txt.xz")

    def value(rid: str) -> float:
        return written[f"generation-infill/{rid}"].value

    # each run's and method's records are its own fills: the span match the stand-in gives that run's spans
    for lengths_of_run, n, sampler, iterations, key in ((lengths_100, 100, "mh", 3, "mh"),
                                                        (lengths_100, 100, "gibbs", 10, "gibbs-t01"),
                                                        (lengths, 400, "left-to-right", 0, "l2r"),
                                                        (lengths, 400, "mask-predict", 2, "mp-t2"),
                                                        (lengths, 400, "mask-predict", 4, "mp-t4")):
        right = sum(length == 1 or (length <= right_limit(sampler) and right_case(i, iterations))
                    for i, length in enumerate(lengths_of_run))
        assert value(f"methods/{key}/span-match-{n}") == pytest.approx(100 * right / n)
    assert value("methods/l2r/token-acc-400-sent-982-pieces") == value("methods/l2r/token-acc.-400-sent.-982-pieces")
    # a method's token accuracy is its span-length cells' accuracies weighted by the pieces of each length
    for name in gi.SPAN_LENGTH_METHODS:
        key, _, column = gi.LABELS[name]
        spans = {int(n): cell["spans"] for n, cell in run_400["methods"][name]["by_span_length"].items()}
        pieces = sum(n * count for n, count in spans.items())
        weighted = sum(written[gi.span_length_id(n, column)].value * n * count for n, count in spans.items()) / pieces
        assert value(f"methods/{key}/token-acc-400-sent-982-pieces") == pytest.approx(weighted)
        assert written[gi.span_length_id(1, column) + "-2"].value == 100  # a 1-piece span: right every time
    assert value("mh/acceptance") == pytest.approx(61)
    # times: seconds a sentence of the run that had the method; Gibbs the mean of its two temperatures
    gibbs = [run_100["methods"][name]["seconds"] / 100 for name in gi.GIBBS]
    assert value("time/gibbs-seconds") == pytest.approx(sum(gibbs) / 2)
    assert written["generation-infill/time/gibbs-seconds"].spread == pytest.approx((min(gibbs), max(gibbs)))
    assert value("time/mh-seconds") == pytest.approx(run_100["methods"]["mh 3 sweeps temperature 1"]["seconds"] / 100)
    assert value("time/mp-t10-seconds") == pytest.approx(run_400["methods"]["mask-predict T=10"]["seconds"] / 400)


def test_another_models_run_is_a_row_of_its_own_group(tmp_path):
    """--group: a model's methods become records under GROUP/ROW and lines of the group's table; a second model
    adds its lines, a re-run of the first replaces its own, and the table renders to the measured values."""
    import importlib.util
    from pathlib import Path

    from bertforge.results_store import read_store, write_records
    spec = importlib.util.spec_from_file_location("gen_results", Path(gi.__file__).parents[1] / "tools" / "gen_results.py")
    gen_results = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_results)

    def run(row: str, accuracy: float) -> None:
        results = {"sentences": 400, "masked_pieces": 982, "methods": {
            "mask-predict T=1": {"token_accuracy": accuracy, "exact_span_match": accuracy / 2},
            "mdlm 10 steps greedy": {"token_accuracy": accuracy + 0.1, "exact_span_match": accuracy}}}
        records, table = gi.model_records(results, "infill-race", row, f"`{row}`", "data", "cmd", tmp_path)
        write_records("infill-race", records, tmp_path, table)

    run("mdlm-1h", 0.2)
    run("fast-1h", 0.3)
    run("mdlm-1h", 0.25)
    store = read_store(tmp_path)
    assert store.records["infill-race/mdlm-1h/mdlm-t10/token-acc"].value == pytest.approx(35.0)
    lines = gen_results.render_table(store, "infill-race").splitlines()[2:]
    assert len(lines) == 4
    assert lines[0].startswith("| `fast-1h` | Mask-Predict T = 1 | 30.0 % | 15.0 % |"), lines
    assert lines[3].startswith("| `mdlm-1h` | MDLM reverse process, 10 steps, greedy | 35.0 % | 25.0 % |"), lines
