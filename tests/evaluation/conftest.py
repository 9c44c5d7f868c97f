"""Fixtures of the GLUE suite tests: a tiny random BERT with MiniLM's real vocabulary, and a GLUE folder made of
links to some of the real task folders."""
from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory, minilm_dir) -> Path:
    """2 layers, 32 wide, random: a whole fine-tuning run in seconds."""
    from bertforge import BertConfig, BertModel
    from bertforge.tokenization import BertTokenizer
    out = tmp_path_factory.mktemp("tiny-bert")
    tok = BertTokenizer.from_pretrained(minilm_dir)
    config = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512)
    BertModel(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture()
def glue_folder(shared_data):
    """`glue_folder(root, "RTE", "WNLI", ...)`: `root` holding links to those folders of ../shared/data/glue."""
    def make(root: Path, *tasks: str) -> Path:
        root.mkdir(parents=True, exist_ok=True)
        for task in tasks:
            (root / task).symlink_to(shared_data / "glue" / task, target_is_directory=True)
        return root
    return make
