"""bench_int8's re-evaluation batches each column as bertforge's evaluation does: longest texts first, 32 at a
time, every text once, its row in the vectors given by the offset of its column."""

import numpy as np

import bench_int8  # noqa: E402


def test_batches_cover_every_text_once_longest_first_at_the_columns_offset(vocab_dir):
    from tokenizers import Tokenizer
    tokenizer = Tokenizer.from_file(str(vocab_dir / "tokenizer.json"))
    texts = [" ".join(["word"] * n) for n in (3, 40, 7, 1, 12) * 14]  # 70 texts: batches of 32, 32, 6
    work = bench_int8.batches(tokenizer, texts, max_length=16, offset=100)
    rows = np.concatenate([idx for idx, _ in work])
    assert sorted(rows) == list(range(100, 170))
    lengths = [len(texts[i - 100]) for i in rows]
    assert lengths == sorted(lengths, reverse=True)
    assert [len(idx) for idx, _ in work] == [32, 32, 6]
    for idx, batch in work:
        mask = batch["attention_mask"]
        assert batch["input_ids"].shape == mask.shape and mask.shape[1] <= 16  # truncated to max_length
        assert (mask.sum(1) == [min(16, 2 + len(texts[i - 100].split())) for i in idx]).all()  # [CLS] words [SEP]


def test_the_records_are_the_tables_cells_and_the_mixed_row_has_no_speed(tmp_path):
    import argparse
    from pathlib import Path

    from bertforge.results_store import read_store, render
    report = {"reported": {"metric": "spearman", "fp32": 86.72, "int8": 86.38, "drop": 0.34, "speedup": 1.52,
                           "examples": 256},
              "independent": {"fp32": 86.72, "int8": 86.38, "drop": 0.34, "speedup": 1.55, "pairs": 1500,
                              "columns_mixed_in_batches": {"fp32": 86.72, "int8": 86.54, "drop": 0.18}}}
    args = argparse.Namespace(pairs=Path("../shared/data/glue/STS-B/dev.tsv"), out=Path("../runs/int8"), rounds=3,
                              records=str(tmp_path))
    bench_int8.write_int8_records(report, args)
    store = read_store(tmp_path)
    rows = store.tables["bench-int8-stsb"]["rows"]
    assert [render(store, cell.strip("{}")) for cell in rows[1][1:]] == ["86.72", "86.38", "0.34", "1.55x"]
    assert rows[2][-1] == "—" and "bench-int8/stsb/mixed-batches/int8-speed-up" not in store.records
    assert store.records["bench-int8/stsb/stated/int8-speed-up"].value == 1.52
