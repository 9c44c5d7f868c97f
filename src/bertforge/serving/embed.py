"""`embed`: sentence embeddings of texts into a file, as `bertforge embed` does. `EmbedSettings` says everything one
such run takes (its flags are derived from it); `embed(settings)` checks them, encodes with a `SentenceEncoder`
and writes a .npy array or JSON lines."""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from bertforge.settings import SettingError, check_settings, part, setting
from bertforge.tasks.embedding.pooling import POOLING_MODES
from bertforge.tasks.inference_options import InferenceOptions, check_plain_text, text_setting
from bertforge.tasks.long_inputs import LongInputOptions

#: What the long-input settings mean for sentence embeddings (their help elsewhere speaks of task heads).
LONG_HELP = {
    "max_seq_length": "tokens the encoder reads per text, up to the model's positions",
    "long_inputs": "a text longer than --max-seq-length: truncate (a one-line warning says how many tokens were "
                   "dropped), refuse (stop, naming the text), or chunk: the text's vector is the mean of the pooled "
                   "vectors of windows --chunk-stride tokens apart, weighted by their tokens, then normalised if "
                   "the model normalises",
}

__all__ = ["BACKENDS", "OUTPUT_KINDS", "EmbedRun", "EmbedSettings", "embed", "read_texts", "write_embeddings"]

OUTPUT_KINDS = (".npy", ".jsonl")
BACKENDS = ("torch", "onnx")


@dataclass(kw_only=True)
class EmbedSettings:
    """An embedding run: the encoder folder, the texts, where the vectors go, their pooling, how the model runs and
    how it reads texts longer than it takes."""

    model: str = setting(help="encoder folder (HF or sentence-transformers)", metavar="DIR")
    input: str | None = setting(None, "texts, one per line ('-' = stdin)", metavar="FILE|-")
    text: list[str] | None = text_setting("texts given on the command line (repeatable)")
    output: str = setting(help="where to write: .npy, .jsonl or - (JSON lines to standard output)", metavar="FILE|-")
    overwrite: bool = setting(False, "replace --output if it exists")
    pooling: str | None = setting(None, "override the folder's pooling", choices=POOLING_MODES)
    normalize: bool | None = setting(None, "unit-length vectors (default: what the folder declares)")
    backend: str = setting("torch", "run the model with PyTorch, or the model.onnx of an exported folder with ONNX "
                           "Runtime", choices=BACKENDS)
    inference: InferenceOptions = part(InferenceOptions, lambda: InferenceOptions(batch_size=32), title="inference",
                                       hide=("max_batch_tokens", "max_chars"),
                                       help={"batch_size": "texts per model call"})
    long: LongInputOptions = part(LongInputOptions, LongInputOptions, title="long inputs", help=LONG_HELP,
                                  deferred={"max_seq_length": "default: the folder's sentence-transformers "
                                                              "length, else the model's positions"})


@dataclass
class EmbedRun:
    """What one run wrote: how many vectors, of which dimension, and the blank input lines it skipped."""

    count: int
    dimension: int
    blank: int


def read_texts(input_file: str | None, texts: list[str] | None) -> tuple[list[str], int]:
    """Texts from --text, then the input file's non-blank lines, and how many blank lines were skipped.

    A blank --text is an error (it was asked for explicitly); a blank line of a file is a gap between texts,
    as `predict`, `score` and `features` read it."""
    out = list(texts or [])
    empty = next((i for i, text in enumerate(out, 1) if not text.strip()), None)
    if empty is not None:
        raise SettingError("{text} #{i} is empty; every {text} is one text to embed", owner=EmbedSettings, i=empty)
    blank = 0
    if input_file:
        from bertforge.textio import open_text
        handle = sys.stdin if input_file == "-" else open_text(input_file)
        with handle:
            for line in handle:
                line = line.rstrip("\r\n")
                if line.strip():
                    out.append(line)
                else:
                    blank += 1
    if not out:
        if input_file:
            raise SettingError("{where} has no text lines: give {text} or an {input} file with one text per line",
                               owner=EmbedSettings, where=input_file)
        raise SettingError("nothing to embed: give {text} or an {input} file with one text per line",
                           owner=EmbedSettings)
    return out, blank


def write_embeddings(target: str, texts: list[str], vectors) -> None:
    """A .npy array or JSON lines, written atomically (a run killed while writing leaves no half-written file),
    or JSON lines on standard output (target '-')."""
    import numpy as np

    from bertforge.atomic import atomic_path
    if target == "-":
        _write_jsonl(sys.stdout, texts, vectors)
        sys.stdout.flush()
        return
    path = Path(target)
    with atomic_path(path) as tmp:
        if path.suffix == ".npy":
            with tmp.open("wb") as out:
                np.save(out, vectors.astype(np.float32))
        else:
            with tmp.open("w", encoding="utf-8") as out:
                _write_jsonl(out, texts, vectors)


def _write_jsonl(handle, texts: list[str], vectors) -> None:
    for i, (text, vector) in enumerate(zip(texts, vectors)):
        handle.write(json.dumps({"index": i, "text": text, "embedding": vector.tolist()}) + "\n")


def embed(settings: EmbedSettings) -> EmbedRun:
    """Run `settings`: one vector per text (the --text ones first, then the input's non-blank lines) into
    `settings.output`."""
    from bertforge.serving.embeddings import SentenceEncoder
    check_settings(settings)
    s, run = settings, settings.inference
    if s.output != "-" and Path(s.output).suffix not in OUTPUT_KINDS:
        raise SettingError("{output} {path}: expected a file ending in {kinds}, or - for JSON lines on standard "
                           "output", owner=EmbedSettings, path=s.output, kinds=" or ".join(OUTPUT_KINDS))
    check_plain_text(s.input, "embed", EmbedSettings)
    if s.output != "-":
        from bertforge.outputs import claim_output_file
        claim_output_file(Path(s.output), overwrite=s.overwrite, inputs=(s.input,))
    texts, blank = read_texts(s.input, s.text)
    encoder = SentenceEncoder.load(s.model, device=run.device, precision=run.precision, backend=s.backend,
                                   long_inputs=s.long)
    if s.long.long_inputs == "truncate":  # one line saying how many tokens the cut texts lost
        from bertforge.tasks.long_inputs import over_length
        over_length(encoder.token_counts(texts), encoder.max_length, s.long, what="text")
    vectors = encoder.encode(texts, batch_size=run.batch_size, pooling=s.pooling, normalize=s.normalize)
    write_embeddings(s.output, texts, vectors)
    return EmbedRun(len(texts), int(vectors.shape[1]), blank)
