"""The paper's feature-based approach (Section 5.3): frozen BERT activations as per-word features.

Each word is represented by its first sub-token's vectors from chosen layers, combined by concatenation
(the paper's best: last four layers), sum, or a single layer, so a separate model (e.g. a BiLSTM tagger)
can be trained on top without fine-tuning BERT.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from bertforge.device import Precision, move_to, placement
from bertforge.settings import MAX_LENGTH, SettingError, check_settings, part, setting
from bertforge.tasks.inference_options import InferenceOptions, check_plain_text, text_setting
from bertforge.tasks.features import collate, token_budget_batches
from bertforge.training.progress import progress as make_bar

COMBINE_MODES = ("concat", "sum", "last", "second-to-last")
DEFAULT_LAYERS = [-1, -2, -3, -4]  # the paper's best feature-based choice: the last four layers, concatenated
MAX_LAYER = 1_000  # a hidden-state index (no model has this many layers)


def select_layers(layers: Sequence[int], combine: str) -> list[int]:
    """Which hidden-state indices (negative = from the top; the embeddings are index 0) a mode reads."""
    if combine == "last":
        return [-1]
    if combine == "second-to-last":
        return [-2]
    if combine in ("concat", "sum"):
        if not layers:
            raise ValueError(f"combine={combine!r} needs at least one layer")
        return list(layers)
    raise ValueError(f"combine must be one of {', '.join(COMBINE_MODES)}, got {combine!r}")


def check_layers(layers: Sequence[int], num_layers: int) -> None:
    """Hidden states are the embeddings (0) and each of `num_layers` layers: indices 0..L or -(L+1)..-1."""
    bad = [i for i in layers if not -(num_layers + 1) <= i <= num_layers]
    if bad:
        raise ValueError(f"layers {','.join(map(str, bad))} out of range: the model has {num_layers} layers, so "
                         f"hidden states 0..{num_layers} (or {-(num_layers + 1)}..-1)")


@torch.no_grad()
def word_features(model, tokenizer, texts: Sequence[Sequence[str]], layers: Sequence[int] = (-1, -2, -3, -4),
                  combine: str = "concat", max_length: int = 512, batch_size: int = 32, *,
                  device: torch.device | str | None = None, precision: Precision | str | None = None,
                  max_batch_tokens: int | None = None, progress: bool = False) -> list[torch.Tensor]:
    """For each text (a list of words): a float32 CPU [n_words, D] tensor, D = hidden x layers for concat,
    else hidden.

    Words cut off by `max_length` get zero vectors, so row i is always word i. Texts run longest first in
    batches of at most `batch_size` texts and `max_batch_tokens` padded tokens, on `device` (default: the
    model's) under `precision` (default fp32); the result is in input order.
    """
    chosen = select_layers(layers, combine)
    config = getattr(model, "config", None)
    if config is not None:
        check_layers(chosen, config.num_hidden_layers)
    device, precision = placement(device, precision, model)
    model.eval()
    chunk = [list(t) for t in texts]
    out: list[torch.Tensor | None] = [None] * len(chunk)
    empty = [i for i, words in enumerate(chunk) if not words]
    todo = [i for i, words in enumerate(chunk) if words]
    if not todo:
        if empty:
            raise ValueError("every text is empty: no words to featurize")
        return []
    enc = tokenizer([chunk[i] for i in todo], is_split_into_words=True, max_length=max_length, truncation=True,
                    return_word_ids=True)
    features = [{"input_ids": enc["input_ids"][k], "token_type_ids": enc["token_type_ids"][k]}
                for k in range(len(todo))]
    pad_id = tokenizer.pad_token_id
    dim = None
    bar = make_bar(len(todo), bar=True, desc="features", unit="text", leave=False, silent=not progress)
    for batch_idx in token_budget_batches([len(f["input_ids"]) for f in features], batch_size, max_batch_tokens):
        batch = move_to(collate([features[k] for k in batch_idx], pad_id), device)
        with precision.autocast():
            hidden = model(batch["input_ids"], attention_mask=batch["attention_mask"],
                           token_type_ids=batch["token_type_ids"], output_hidden_states=True).hidden_states
        if config is None:
            check_layers(chosen, len(hidden) - 1)
        picked = [hidden[i].float() for i in chosen]
        combined = (torch.cat(picked, -1) if combine == "concat" else torch.stack(picked).sum(0)).cpu()
        dim = combined.shape[-1]
        for row, k in enumerate(batch_idx):
            i = todo[k]
            feats = combined.new_zeros(len(chunk[i]), dim)
            seen: set[int] = set()
            for pos, w in enumerate(enc["word_ids"][k]):
                if w is not None and w >= 0 and w not in seen:
                    seen.add(w)
                    feats[w] = combined[row, pos]
            out[i] = feats
        bar.update(len(batch_idx))
    bar.close()
    for i in empty:
        out[i] = torch.zeros(0, dim)
    return out  # type: ignore[return-value]


# ---- `bertforge features`: texts in, a safetensors file of per-word features out ----------------------------------
def parse_layers(value: str) -> list[int]:
    """'-1,-2,-3,-4' -> [-1, -2, -3, -4]: hidden-state indices, comma-separated."""
    try:
        layers = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise SettingError("{layers} takes comma-separated integers, not {got!r}", owner=FeaturesSettings,
                           got=value) from None
    if not layers:
        raise SettingError("{layers} needs at least one index", owner=FeaturesSettings)
    return layers


@dataclass(kw_only=True)
class FeaturesSettings:
    """A feature extraction: the checkpoint, the texts, the layers and how they combine, and the output file."""

    model: str = setting(help="checkpoint folder (any head; the encoder is used)", metavar="DIR")
    input: str | None = setting(None, "plain text file, one text per line ('-' = stdin)", metavar="FILE|-")
    text: list[str] | None = text_setting("texts given on the command line (repeatable)")
    layers: list[int] | None = setting(None, "hidden-state indices: 0 = embeddings, 1..L = layers, negative from the "
                                       "top", parse=parse_layers, maximum=MAX_LAYER,
                                       deferred="default: " + ",".join(map(str, DEFAULT_LAYERS)))
    combine: str = setting("concat", "how the chosen layers make one vector per word", choices=COMBINE_MODES)
    max_seq_length: int = setting(512, "tokens per input, longer ones truncated", positive=True, maximum=MAX_LENGTH)
    inference: InferenceOptions = part(
        InferenceOptions, lambda: InferenceOptions(batch_size=32), title="inference",
        help={"max_chars": "characters kept of each line before splitting into words; the rest of a longer line is "
                           "dropped", "max_batch_tokens": "most padded tokens per batch"})
    output: str = setting(help="where to write the features", metavar="FILE.safetensors")
    overwrite: bool = setting(False, "replace --output if it exists")


@dataclass
class FeatureRun:
    """What one extraction did: the words of each text, the feature size, how long it took and where."""

    words: list[list[str]]
    dim: int
    cut: int          # lines cut at max_chars
    seconds: float
    device: torch.device
    precision: Precision


def _chosen_layers(s: FeaturesSettings, n_layers: int) -> list[int]:
    """The layers to read: hidden-state indices outside the model are refused, naming the default if it is."""
    layers = DEFAULT_LAYERS if s.layers is None else s.layers
    bad = [i for i in select_layers(layers, s.combine) if not -(n_layers + 1) <= i <= n_layers]
    if not bad:
        return layers
    indices = f"hidden-state indices 0..{n_layers} or {-(n_layers + 1)}..-1"
    if s.layers is not None:
        raise SettingError("{layers} {bad}: the model has {n} layers; use {indices}", owner=FeaturesSettings,
                           bad=",".join(map(str, bad)), n=n_layers, indices=indices)
    raise SettingError("the default {layers} {given} needs {count} layers and the model has {n}: give {layers} with "
                       "{indices}", owner=FeaturesSettings, given=",".join(map(str, layers)), count=len(layers),
                       n=n_layers, indices=indices)


def _read_words(s: FeaturesSettings) -> tuple[list[list[str]], int]:
    """The words of each text (--text ones, then the input's non-blank lines) and how many lines were cut."""
    from bertforge.tasks.prediction_io import open_input
    from bertforge.tasks.prediction_inputs import split_words
    lines = list(s.text or [])
    blank = next((i for i, text in enumerate(lines, 1) if not text.strip()), None)
    if blank is not None:
        raise SettingError("{text} #{i} is empty; every {text} is one text to read", owner=FeaturesSettings, i=blank)
    if s.input:
        with open_input(s.input) as handle:
            lines += [line for line in handle if line.strip()]
    limit = s.inference.max_chars
    texts = [[w for w, _, _ in split_words(line[:limit])] for line in lines]
    if not texts:
        if s.input:
            raise ValueError(f"{s.input}: no text lines")
        raise SettingError("nothing to read: give {input} FILE or {text}", owner=FeaturesSettings)
    return texts, sum(len(line.rstrip("\r\n")) > limit for line in lines)


def extract_features(settings: FeaturesSettings, progress: bool = False) -> FeatureRun:
    """Run `settings`: one [words, dim] tensor per text into `settings.output` (keys text_0, text_1, ...; the
    layers, the combine mode and the words as JSON in its metadata), written atomically."""
    import json
    import time

    from bertforge.atomic import atomic_save_safetensors
    from bertforge.model.auto import AutoModel
    from bertforge.outputs import claim_output_file
    from bertforge.tokenization import load_tokenizer
    check_settings(settings)
    s, run = settings, settings.inference
    check_plain_text(s.input, "features", FeaturesSettings)
    if not s.output.endswith(".safetensors"):
        raise SettingError("{output} {path}: expected a file name ending in .safetensors (the format written)",
                           owner=FeaturesSettings, path=s.output)
    claim_output_file(s.output, overwrite=s.overwrite, inputs=(s.input,))
    texts, cut = _read_words(s)
    device, precision = placement(run.device, run.precision)
    model = AutoModel.from_pretrained(s.model)
    layers = _chosen_layers(s, model.config.num_hidden_layers)
    model.to(device)
    start = time.perf_counter()
    feats = word_features(model, load_tokenizer(s.model), texts, layers, s.combine, s.max_seq_length, run.batch_size,
                          device=device, precision=precision, max_batch_tokens=run.max_batch_tokens, progress=progress)
    seconds = time.perf_counter() - start
    tensors = {f"text_{i}": f.contiguous() for i, f in enumerate(feats)}
    meta = {"layers": json.dumps(layers), "combine": s.combine, "words": json.dumps(texts)}
    atomic_save_safetensors(tensors, s.output, metadata=meta)
    return FeatureRun(texts, int(feats[0].shape[-1]), cut, seconds, device, precision)
