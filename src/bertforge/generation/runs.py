"""What `bertforge generate`, `score` and `fill-mask` run: one settings dataclass each (their flags are derived
from it) and one entry function each, which checks the settings, loads the model and returns the results for
the command to print.

The bounds of the counts are far beyond any useful run (mask-predict uses T=10, Gibbs sampling a few hundred
sweeps): a slip of the keyboard past one would otherwise run for days or allocate without limit.
"""
from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from bertforge.device import PRECISION_HELP, DeviceOptions
from bertforge.settings import MAX_SEED, SettingError, check_settings, part, setting
from bertforge.tasks.inference_options import InferenceOptions, check_plain_text, text_setting

__all__ = ["FillMaskSettings", "GenerateSettings", "MaskedLMOptions", "ScoreSettings", "fill_masks",
           "generate_samples", "score_sentences"]

MAX_ITERATIONS = 1_000
MAX_SAMPLES = 10_000
MAX_BATCH = 1_024
MAX_LENGTH = 8_192       # the longest position table of any family (ModernBERT); the model's own limit is checked too
MAX_LENGTH_BEAM = 100
MAX_TOP_K = 1_000_000    # beyond every vocabulary: "all tokens"
MAX_TOKENS = 1 << 20
MAX_FILL_TOP_K = 1_000   # a longer list is unreadable; --targets gives the rank of any word instead
# A sentence to fill is short; a megabyte of text is a mistake (a file pasted as an argument) that would only
# cost minutes of tokenizing before being truncated to the model's length anyway.
FILL_MAX_CHARS = 100_000
MAX_FILL_CHARS = 10_000_000


@dataclass
class MaskedLMOptions:
    """How a masked LM runs, for `generate` and `score` alike (with the device and precision of `InferenceOptions`)."""

    max_tokens: int = setting(8192, "padded tokens per model call", kind="range", positive=True, maximum=MAX_TOKENS)
    progress: bool = setting(True, "no progress bar on stderr", flag="--no-progress")


def _mlm_inference() -> Any:
    """The `InferenceOptions` part of the MLM verbs: device and precision (their batches are `max_tokens`)."""
    return part(InferenceOptions, InferenceOptions, title="inference", hide=("batch_size", "max_batch_tokens",
                                                                            "max_chars"),
                help={"precision": PRECISION_HELP + "; bf16 is faster on CPUs with native bf16 but moves "
                                                    "log-probabilities by thousandths of a nat per token "
                                                    "(docs/GENERATION.md)"})


@dataclass(kw_only=True)
class GenerateSettings:
    """Samples from a masked LM (infilling --text, or --length tokens after --prefix), or targets of an
    encoder-decoder for each --source."""

    model: str = setting(help="a checkpoint folder with a trained MLM head, or an encoder-decoder folder",
                         metavar="DIR")
    source: list[str] | None = setting(None, "encoder-decoder: a source text (repeat for more)", repeatable=True,
                                       metavar="TEXT")
    input: str | None = setting(None, 'encoder-decoder: sources, one per line (.txt) or {"source": ...} per line '
                                '(.jsonl)', kind="existing_file", metavar="FILE")
    length_beam: int = setting(3, "encoder-decoder: target lengths tried per source, the most likely ones",
                               kind="range", positive=True, maximum=MAX_LENGTH_BEAM)
    max_source_length: int = setting(256, "encoder-decoder: source tokens kept", kind="range", positive=True,
                                     maximum=MAX_LENGTH)
    text: list[str] | None = text_setting('masked LM: a text with masks, e.g. "the [MASK] [MASK] sat on the mat ." '
                                          '(repeatable: --num-samples samples of each; every sample\'s "input" is '
                                          'the index of its --text)')
    span_lengths: str | None = setting(None, "expand the i-th mask of each --text into N masks", metavar="N,...")
    length: int | None = setting(None, "generate this many tokens (unconditional generation), at most what the "
                                 "model takes", kind="range", positive=True, maximum=MAX_LENGTH)
    prefix: str | None = setting(None, "with --length: text the generated tokens follow")
    sampler: str = setting("mask-predict", "mask-predict, gibbs, mh, left-to-right or mdlm (masked diffusion's "
                           "reverse process, for a model pre-trained with --objective mdlm)")
    iterations: int | None = setting(None, "mask-predict: T; gibbs and mh: sweeps over the targets; mdlm: reverse "
                                     "steps (each reveals a share of the masks; none is left after the last)",
                                     kind="range",
                                     positive=True, maximum=MAX_ITERATIONS, deferred="default: 10")
    num_samples: int = setting(1, "samples per --text", kind="range", positive=True, maximum=MAX_SAMPLES)
    batch_size: int = setting(8, "samples run together", kind="range", positive=True, maximum=MAX_BATCH)
    seed: int = setting(0, "the same seed gives the same samples", kind="range", minimum=0, maximum=MAX_SEED)
    temperature: float | None = setting(None, "sampling temperature", non_negative=True, maximum=100.0,
                                        deferred="default: 0 (greedy) for mask-predict and left-to-right, 1 for "
                                                 "gibbs, mh and mdlm")
    top_k: int = setting(0, "sample from the k most likely tokens, 0 for all", kind="range", minimum=0,
                         maximum=MAX_TOP_K)
    top_p: float = setting(1.0, "mdlm: sample from the smallest set of most likely tokens holding this probability "
                           "(nucleus sampling; 1 for all)", metavar="P", positive=True, maximum=1.0)
    burn_in: int = setting(0, "gibbs: sweeps drawn from the full distribution before --top-k applies, fewer "
                           "than --iterations", kind="range", minimum=0, maximum=MAX_ITERATIONS - 1)
    parallel: bool = setting(False, "gibbs: re-draw all targets at once each sweep")
    mlm: MaskedLMOptions = part(MaskedLMOptions, MaskedLMOptions, title="masked LM")
    inference: InferenceOptions = _mlm_inference()


@dataclass(kw_only=True)
class ScoreSettings:
    """Pseudo-log-likelihoods of sentences (--text, then --input's lines) under a masked LM."""

    model: str = setting(help="a checkpoint folder with a trained MLM head", metavar="DIR")
    input: str | None = setting(None, "one sentence per line (.txt/.gz/.xz); blank lines skipped", metavar="FILE")
    text: list[str] | None = text_setting("sentences given on the command line (repeatable; scored before --input's)")
    per_token: bool = setting(False, "also print the tokens and their log-probabilities")
    mlm: MaskedLMOptions = part(MaskedLMOptions, MaskedLMOptions, title="masked LM")
    inference: InferenceOptions = _mlm_inference()


@dataclass(kw_only=True)
class FillMaskSettings:
    """The top-k tokens for each [MASK] of sentences, and where chosen words rank (fill-mask ranks in fp32)."""

    model: str = setting(help="a checkpoint folder with a trained MLM head and its tokenizer", kind="existing_dir",
                         metavar="DIR")
    sentences: list[str] = setting(help='sentences such as "the man went to the [MASK] ."', default_factory=list,
                                   positional=True, nargs="*", metavar="TEXT")
    text: list[str] | None = text_setting("sentences given with a flag, as every verb takes them (repeatable; read "
                                          "after the positional ones)")
    top_k: int = setting(5, "how many predictions to print per mask", kind="range", positive=True,
                         maximum=MAX_FILL_TOP_K)
    targets: str | None = setting(None, "comma-separated words to rank at every mask (a word that splits into several "
                                  "pieces is ranked by its first piece, as transformers' fill-mask pipeline does)",
                                  metavar="WORD,...")
    max_chars: int = setting(FILL_MAX_CHARS, "refuse a text longer than this many characters, checked before "
                             "tokenizing", positive=True, maximum=MAX_FILL_CHARS, metavar="N")
    placement: DeviceOptions = part(DeviceOptions, DeviceOptions, title="device", hide=("precision",))


@contextlib.contextmanager
def naming_the_model(model: str, precision: str) -> Iterator[None]:
    """NaN/inf scores are reported with the model folder they came from (and the setting that may help)."""
    from bertforge.generation.mlm import NonFiniteScoresError
    try:
        yield
    except NonFiniteScoresError as err:
        hint = "" if precision == "fp32" else "; --precision fp32 rules out an overflow"
        raise NonFiniteScoresError(f"{model}: {err}{hint}") from None


def _bar(options: MaskedLMOptions, desc: str, unit: str):
    from bertforge.training.progress import progress
    return (lambda total: progress(total, bar=True, desc=desc, unit=unit)) if options.progress else None


# ---- generate ---------------------------------------------------------------------------------------------------
def parse_lengths(text: str | None) -> list[int] | None:
    """'2,3' -> [2, 3]: the span each mask of a --text becomes."""
    if not text:
        return None
    try:
        lengths = [int(part) for part in text.split(",")]
    except ValueError:
        raise SettingError("{span_lengths}: expected comma-separated whole numbers such as 2,3, got {got!r}",
                           owner=GenerateSettings, got=text) from None
    if not all(1 <= n <= MAX_LENGTH for n in lengths):
        raise SettingError("{span_lengths}: expected lengths from 1 to {most:,}, got {got!r}", owner=GenerateSettings,
                           most=MAX_LENGTH, got=text)
    return lengths


def generate_samples(settings: GenerateSettings) -> list[dict]:
    """Every sample `settings` asks for, in order (each --text's samples tagged with its index as "input"); all
    drawn before any is returned, so a bad --text never leaves half an output."""
    from bertforge.generation import generate, load_mlm
    from bertforge.generation.loading import is_encoder_decoder
    check_settings(settings)
    s = settings
    if s.sampler == "gibbs" and s.burn_in >= (s.iterations or 10):
        raise SettingError("{burn_in} {got} must be below {iterations} ({most})", owner=GenerateSettings,
                           got=s.burn_in, most=s.iterations or 10)
    if s.top_p < 1.0 and s.sampler != "mdlm":
        raise SettingError("{top_p} is for {sampler} mdlm; {given} draws with {temperature} and {top_k}",
                           owner=GenerateSettings, given=s.sampler)
    if is_encoder_decoder(s.model):
        return _generate_conditional(s)
    if s.source or s.input:
        raise SettingError("{source}/{input} need an encoder-decoder folder; {folder} is a masked LM (give {text}, or "
                           "{length})", owner=GenerateSettings, folder=s.model)
    if not s.text and s.length is None:
        raise SettingError("give {text} with mask tokens (infilling) or {length} N (unconditional generation)",
                           owner=GenerateSettings)
    lengths = parse_lengths(s.span_lengths)
    model, tokenizer = load_mlm(s.model, device=s.inference.device)
    bar = _bar(s.mlm, "generate", "call")
    samples = []
    for index, text in enumerate(s.text or [None]):
        with naming_the_model(s.model, s.inference.precision):
            results = generate(model, tokenizer, text=text, span_lengths=lengths, length=s.length, prefix=s.prefix,
                               sampler=s.sampler, iterations=s.iterations, num_samples=s.num_samples,
                               batch_size=s.batch_size, seed=s.seed, temperature=s.temperature, top_k=s.top_k,
                               burn_in=s.burn_in, parallel=s.parallel, top_p=s.top_p, max_tokens=s.mlm.max_tokens,
                               precision=s.inference.precision, progress=bar)
        samples += [result if text is None else {"input": index, **result} for result in results]
    return samples


def read_sources(s: GenerateSettings) -> list[str]:
    """--source texts, then --input's lines (.jsonl: each line's "source"); one-line errors name the line."""
    sources = list(s.source or [])
    if s.input is not None:
        from bertforge.tasks.readers.base import iter_lines
        for number, line in iter_lines(s.input):
            if not line.strip():
                continue
            if str(s.input).endswith(".jsonl"):
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as err:
                    raise ValueError(f"{s.input}, line {number}: expected a JSON object, got invalid JSON "
                                     f"({err.msg})") from None
                if not isinstance(record, dict) or not isinstance(record.get("source"), str):
                    raise ValueError(f"{s.input}, line {number}, field 'source': expected a string")
                line = record["source"]
            sources.append(line)
    if not sources:
        raise SettingError("an encoder-decoder generates from {source} TEXT or {input} FILE", owner=GenerateSettings)
    return sources


def _generate_conditional(s: GenerateSettings) -> list[dict]:
    from bertforge.generation.conditional import CONDITIONAL_SAMPLERS, generate_conditional
    from bertforge.generation.loading import load_encoder_decoder
    if s.text or s.length:
        raise SettingError("{text}/{length} are for masked LMs; an encoder-decoder takes {source} or {input}",
                           owner=GenerateSettings)
    if s.sampler not in CONDITIONAL_SAMPLERS:
        raise SettingError("{sampler}: an encoder-decoder decodes with {samplers}, got {got!r}",
                           owner=GenerateSettings, samplers=" or ".join(CONDITIONAL_SAMPLERS), got=s.sampler)
    sources = read_sources(s)
    model, tokenizer = load_encoder_decoder(s.model, device=s.inference.device)
    return generate_conditional(model, tokenizer, sources, sampler=s.sampler,
                                iterations=10 if s.iterations is None else s.iterations, length_beam=s.length_beam,
                                batch_size=s.batch_size, max_source_length=s.max_source_length,
                                precision=s.inference.precision, progress=_bar(s.mlm, "generate", "source"))


# ---- score ------------------------------------------------------------------------------------------------------
def read_sentences(path: str) -> tuple[list[str], list[str]]:
    """The non-blank lines of `path` and their "FILE:LINE" labels for error messages."""
    from bertforge.textio import iter_lines
    texts, labels = [], []
    for number, line in enumerate(iter_lines(path), 1):
        if line.strip():
            texts.append(line.strip())
            labels.append(f"{path}:{number}")
    if not texts:
        raise ValueError(f"{path}: no sentences (the file is empty or blank)")
    return texts, labels


def score_sentences(settings: ScoreSettings) -> list[dict]:
    """One result per sentence (the --text ones, then --input's non-blank lines): its pseudo-log-likelihood."""
    from bertforge.generation import load_mlm, pseudo_log_likelihood
    check_settings(settings)
    s = settings
    if not s.text and not s.input:
        raise SettingError("nothing to score: give {input} FILE or {text}", owner=ScoreSettings)
    texts, labels = list(s.text or []), [f"--text #{i + 1}" for i in range(len(s.text or []))]
    if s.input:
        check_plain_text(s.input, "score", ScoreSettings)
        more, where = read_sentences(s.input)
        texts, labels = texts + more, labels + where
    model, tokenizer = load_mlm(s.model, device=s.inference.device)
    with naming_the_model(s.model, s.inference.precision):
        return pseudo_log_likelihood(model, tokenizer, texts, per_token=s.per_token, max_tokens=s.mlm.max_tokens,
                                     precision=s.inference.precision, labels=labels,
                                     progress=_bar(s.mlm, "score", "copy"))


# ---- fill-mask --------------------------------------------------------------------------------------------------
@dataclass
class FilledMasks:
    """Each text's masks filled (`fill_mask`'s result), with what printing them needs of the tokenizer."""

    texts: list[str]
    masks: list[list[dict]]
    vocab_size: int
    mask_token: str


def fill_masks(settings: FillMaskSettings) -> FilledMasks:
    """The top-k tokens of every mask of each sentence (positional ones, then --text ones), and the ranks of the
    --targets words there."""
    from bertforge.generation.fill_mask import fill_mask
    from bertforge.generation.loading import load_mlm
    from bertforge.generation.mlm import NonFiniteScoresError
    check_settings(settings)
    s = settings
    texts = list(s.sentences or []) + list(s.text or [])
    if not texts:
        raise SettingError('nothing to fill: give sentences, e.g. fill-mask {model} DIR "the [MASK] is blue ." (or '
                           '{text} "...")', owner=FillMaskSettings)
    for i, text in enumerate(texts, 1):
        if len(text) > s.max_chars:
            raise SettingError("text #{i} has {n:,} characters; the limit is {max_chars} {most:,}",
                               owner=FillMaskSettings, i=i, n=len(text), most=s.max_chars)
    model, tokenizer = load_mlm(s.model, device=s.placement.device)
    targets = [w.strip() for w in (s.targets or "").split(",") if w.strip()]
    try:
        filled = fill_mask(model, tokenizer, texts, s.top_k, targets)
    except NonFiniteScoresError as err:
        raise NonFiniteScoresError(f"{s.model}: {err}") from None
    return FilledMasks(texts, filled, tokenizer.vocab_size, tokenizer.mask_token)
