"""Write the generated parts of docs/REFERENCE.md: the size presets and the config.json fields, from the code.

Run ``python tools/gen_reference.py`` after changing a preset or a config field; ``--check`` exits 1 when the
page is not what the code gives (``tests/tools/test_gen_reference.py`` does the same). Each generated part sits
between ``<!-- begin generated: NAME -->`` and ``<!-- end generated: NAME -->``; the prose around them is
written by hand.

Parameters are counted on PyTorch's meta device (shapes only, nothing allocated). FLOPs are matmul FLOPs, a
multiply-add counted as 2, for one sequence of 128 real tokens (bertforge.model.flops.count_flops).
"""
from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from pathlib import Path

import torch

from bertforge.config import PRESETS, BertConfig
from bertforge.model.albert import ALBERT_PRESETS
from bertforge.model.auto import FAMILY_MODULES, family, preset_config
from bertforge.model.distilbert import HF_FIELDS as DISTILBERT_HF_NAMES
from bertforge.model.electra import ELECTRA_PRESETS
from bertforge.model.flops import count_flops
from bertforge.model.modernbert import HF_RENAMES as MODERNBERT_HF_NAMES
from bertforge.model.modernbert import MODERNBERT_PRESETS
from bertforge.model.xlnet import HF_FIELDS as XLNET_HF_NAMES

__all__ = ["render", "preset_rows", "main", "SEQ_LEN"]

REFERENCE_DOC = Path(__file__).resolve().parents[1] / "docs" / "REFERENCE.md"
SEQ_LEN = 128

# The presets `--model` takes, per family: a bare size is BERT's; `<family>-<size>` is that family's.
FAMILY_SIZES = {"bert": list(PRESETS), "roberta": list(PRESETS), "albert": list(ALBERT_PRESETS),
                "distilbert": list(PRESETS), "electra": list(ELECTRA_PRESETS), "modernbert": list(MODERNBERT_PRESETS)}

# What each config.json field means. A field of a config class missing here stops the generator, so a new
# field cannot reach a release undocumented.
MEANINGS = {
    "vocab_size": "rows of the word-embedding table (set from the tokenizer when pre-training from scratch)",
    "hidden_size": "width H of every layer's input and output",
    "num_hidden_layers": "number of transformer layers",
    "num_attention_heads": "attention heads per layer (H must divide by it)",
    "intermediate_size": "inner width of the feed-forward block",
    "hidden_act": "activation of the feed-forward block (gelu, gelu_new, gelu_pytorch_tanh, gelu_fast, relu, silu, "
                  "swish, tanh)",
    "hidden_dropout_prob": "dropout on the embeddings and on each sub-block's output",
    "attention_probs_dropout_prob": "dropout on the attention probabilities",
    "max_position_embeddings": "longest sequence the position table covers",
    "type_vocab_size": "segment (token type) embeddings; 0: none",
    "initializer_range": "standard deviation of the initial weights",
    "layer_norm_eps": "LayerNorm epsilon",
    "pad_token_id": "id of the padding token",
    "classifier_dropout": "dropout before a task head (null: hidden_dropout_prob)",
    "embedding_size": "width E of the embedding tables; E != H adds a projection E -> H (null: H)",
    "layer_sharing": "which sub-blocks all layers share: none, attention, ffn, all",
    "pre_norm": "LayerNorm before each sub-block, plus a final norm (false: after the residual sum, as BERT)",
    "feed_forward_glu": "gated feed-forward (GeGLU): the up-projection is 2 x intermediate_size wide",
    "attention_bias": "biases of the query/key/value and attention-output projections",
    "mlp_bias": "biases of the feed-forward projections",
    "norm_bias": "LayerNorm biases",
    "rope_theta": "rotary position embeddings with this base instead of the position table (null: off)",
    "local_rope_theta": "rotary base of the local-attention layers (null: rope_theta)",
    "local_attention": "window of the local-attention layers, in tokens (null: every layer global)",
    "global_attn_every_n_layers": "with local_attention: layer i attends globally when i % n == 0",
    "relative_attention_num_buckets": "T5's relative position bias with this many buckets (null: off)",
    "relative_attention_max_distance": "offsets this far and beyond share the last relative-position bucket",
    "head_bias": "bias of the MLM head's dense transform",
    "head_act": "activation of the MLM head (null: hidden_act)",
    "decoder_bias": "bias of the MLM vocabulary decoder",
    "is_decoder": "an encoder-decoder's decoder: attends left to right in transformers",
    "add_cross_attention": "a decoder layer attends to the encoder's output after its self-attention",
    "id2label": "a fine-tuned head's label names by id (label2id is written beside it)",
    "problem_type": "what a sequence head computes: single_label_classification, regression, ...",
    "bos_token_id": "id of the beginning-of-sequence token",
    "eos_token_id": "id of the end-of-sequence token",
    "sinusoidal_pos_embds": "fixed sine/cosine position table instead of a learned one",
    "qa_dropout": "dropout before the question-answering head",
    "seq_classif_dropout": "dropout before the sequence-classification head",
    "tie_weights_": "MLM decoder tied to the word embeddings (always true)",
    "summary_type": "which token the multiple-choice head reads (first)",
    "summary_use_proj": "a dense layer in the multiple-choice summary",
    "summary_activation": "activation of the multiple-choice summary (null: none)",
    "summary_last_dropout": "dropout after the multiple-choice summary",
    "summary_first_dropout": "dropout before the multiple-choice summary",
    "embedding_dropout": "dropout on the embeddings",
    "initializer_cutoff_factor": "initial weights are truncated at this many standard deviations",
    "classifier_pooling": "how a sequence head pools the tokens: cls or mean",
    "attn_type": "XLNet: bi (every token sees every other) or uni (itself and those before it)",
    "clamp_len": "XLNet: relative offsets beyond this share one position encoding (-1: no clamping)",
    "same_length": "XLNet with attn_type uni: every token sees the same number of tokens",
    "bi_data": "XLNet: two-direction pre-training data (not supported; always false)",
    "sep_token_id": "Longformer: the separator id; question answering's default global tokens end at the first",
    "attention_window": "Longformer: tokens each token attends to around itself (one even width, or one per layer)",
    "attention_type": "BigBird: block_sparse (window, global and random blocks) or original_full (dense)",
    "use_bias": "BigBird: biases on the query, key and value projections (only true is supported)",
    "rescale_embeddings": "BigBird: scale the embeddings by sqrt(hidden_size) (only false is supported)",
    "block_size": "BigBird: tokens per attention block",
    "num_random_blocks": "BigBird: random key blocks each query block attends to",
}

# config.json names that differ from bertforge's field names, per family (transformers' names)
HF_NAMES = {
    "distilbert": {ours: hf for hf, ours in DISTILBERT_HF_NAMES.items()},
    "modernbert": {ours: hf for hf, ours in MODERNBERT_HF_NAMES.items()},
    "xlnet": {ours: hf for hf, ours in XLNET_HF_NAMES.items()},
    "albert": {"classifier_dropout": "classifier_dropout_prob", "layer_sharing": "num_hidden_groups"},
}


def _millions(n: float) -> str:
    return f"{n / 1e6:,.1f}M"


def preset_rows() -> list[dict]:
    """One row per preset: its shape, parameter counts and FLOPs per token."""
    rows = []
    for family_name, sizes in FAMILY_SIZES.items():
        fam = family(family_name)
        for size in sizes:
            name = size if family_name == "bert" else f"{family_name}-{size}"
            config = preset_config(name)
            with torch.device("meta"):
                encoder = fam.model_class("base")(config)
            forward = count_flops(config, [SEQ_LEN]) / SEQ_LEN
            rows.append(dict(name=name, family=family_name, layers=config.num_hidden_layers,
                             hidden=config.hidden_size, heads=config.num_attention_heads,
                             intermediate=config.intermediate_size, embedding=config.embedding_dim,
                             vocab=config.vocab_size, sharing=config.layer_sharing, glu=config.feed_forward_glu,
                             parameters=encoder.num_parameters(),
                             non_embedding=encoder.num_parameters(exclude_embeddings=True),
                             forward_flops=forward))
    return rows


def _presets_table() -> list[str]:
    lines = ["| `--model` | layers | hidden | heads | intermediate | embedding E | vocab | parameters | "
             "without embeddings | forward MFLOP/token |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in preset_rows():
        notes = []
        if row["sharing"] != "none":
            notes.append(f"layers share {row['sharing']}")
        if row["glu"]:
            notes.append("GeGLU")
        name = f"`{row['name']}`" + (f" ({', '.join(notes)})" if notes else "")
        lines.append(f"| {name} | {row['layers']} | {row['hidden']} | {row['heads']} | {row['intermediate']} | "
                     f"{row['embedding']} | {row['vocab']:,} | {_millions(row['parameters'])} | "
                     f"{_millions(row['non_embedding'])} | {row['forward_flops'] / 1e6:,.1f} |")
    return lines


def _families_using(name: str) -> list[str]:
    return [f for f in FAMILY_MODULES if name in {x.name for x in dataclasses.fields(family(f).config_class)}]


def _default(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def config_rows() -> list[dict]:
    """One row per config field of any family: meaning, BERT's default, other families' defaults and names."""
    bert_fields = [f.name for f in dataclasses.fields(BertConfig) if f.name != "extra"]
    own = [f.name for fam in FAMILY_MODULES for f in dataclasses.fields(family(fam).config_class)
           if f.name != "extra" and f.name not in bert_fields]
    names = bert_fields + list(dict.fromkeys(own))
    undocumented = [n for n in names if n not in MEANINGS]
    if undocumented:
        raise SystemExit(f"tools/gen_reference.py: say what config field(s) {', '.join(undocumented)} mean "
                         "(MEANINGS)")
    defaults = {fam: family(fam).config_class() for fam in FAMILY_MODULES}
    rows = []
    for name in names:
        used = _families_using(name)
        first = "bert" if "bert" in used else used[0]
        base = getattr(defaults[first], name)
        others = [f"{fam} {_default(getattr(defaults[fam], name))}" for fam in used
                  if fam != first and getattr(defaults[fam], name) != base]
        hf = [f"{fam}: `{HF_NAMES[fam][name]}`" for fam in HF_NAMES if name in HF_NAMES[fam] and fam in used]
        rows.append(dict(name=name, meaning=MEANINGS[name], families="all" if len(used) == len(FAMILY_MODULES)
                         else ", ".join(used), default=f"{_default(base)}" + ("" if first == "bert" else f" ({first})"),
                         others=", ".join(others), hf=", ".join(hf)))
    return rows


def _config_table() -> list[str]:
    lines = ["| field | what it sets | families | default | other families' defaults | name in config.json |",
             "|---|---|---|---|---|---|"]
    for row in config_rows():
        lines.append(f"| `{row['name']}` | {row['meaning']} | {row['families']} | {row['default']} | "
                     f"{row['others']} | {row['hf']} |")
    return lines


PARTS = {"presets": _presets_table, "config-fields": _config_table}
_REGION = re.compile(r"(<!-- begin generated: (?P<name>[\w-]+) -->\n).*?(<!-- end generated: (?P=name) -->)", re.S)


def render(page: str) -> str:
    """`page` with every generated region filled from the code."""
    def fill(match: re.Match) -> str:
        name = match.group("name")
        if name not in PARTS:
            raise SystemExit(f"tools/gen_reference.py: no generated part named {name!r}; known: {', '.join(PARTS)}")
        return match.group(1) + "\n".join(PARTS[name]()) + "\n" + match.group(3)
    return _REGION.sub(fill, page)


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--check", action="store_true", help="exit 1 when docs/REFERENCE.md is not current")
    check = args.parse_args(argv).check
    current = REFERENCE_DOC.read_text(encoding="utf-8")
    text = render(current)
    if check:
        if current != text:
            print(f"{REFERENCE_DOC.name} is not current: run python tools/gen_reference.py", file=sys.stderr)
            return 1
        return 0
    REFERENCE_DOC.write_text(text, encoding="utf-8")
    print(f"wrote {REFERENCE_DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
