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
