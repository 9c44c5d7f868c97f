"""Pre-training: MLM + NSP (BERT), MLM + SOP (ALBERT), MLM (RoBERTa, DistilBERT) or left-to-right LM, as a
stage of the training engine (`training/engine.py`, which owns the loop, resume, DDP and precision).

`run_pretraining(PretrainConfig(...))` is what `bertforge pretrain` calls; `pretrain(data, output, **kw)` is the
same with keyword arguments (engine settings such as `max_steps` or `lr` go to `PretrainConfig.train`).
"""
from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import torch

from bertforge.config import config_file
from bertforge.data import MaskingConfig, PretrainingDataset, load_manifest
from bertforge.data.masking import parse_rate_schedule, phase_value, rate_at
from bertforge.data.shards import MANIFEST, load_tokenizer
from bertforge.data.objectives import OBJECTIVE_TABLE
from bertforge.data.permutation import PermutationConfig
from bertforge.device import Precision
from bertforge.settings import MAX_BATCH, MAX_LENGTH, SettingError, flat_keywords, part, setting
from bertforge.training.engine import FaultHooks, FitResult, NonFiniteLossError, Session, Stage, TrainOptions
from bertforge.training.options import pretrain_defaults
from bertforge.pretraining.mdlm import CorruptingStep
from bertforge.pretraining.plm import plm_batch, plm_forward
from bertforge.pretraining.recipes import DEFAULT_RECIPE, RECIPES, recipe_options
from bertforge.training.run import Built, train

__all__ = ["PretrainConfig", "PretrainResult", "pretrain", "run_pretraining", "NonFiniteLossError"]


BY_RECIPE = "default: set by --recipe"
INITS = ("model", "bert")


@flat_keywords
@dataclass
class PretrainConfig:
    """A pre-training run: corpus, model, objective and masking, and the engine's settings (`train`; also given
    by their own names, `max_steps=...`). `from_options` fills what is not given from a recipe."""

    data: str = setting(help="a folder written by `bertforge prepare`", metavar="DIR")
    output: str = setting(help="folder for the model, its tokenizer, metrics and checkpoints", metavar="DIR")
    model: str = setting("tiny", "a size (tiny, mini, small, medium, base, large), optionally of a family "
                         "(roberta-mini, albert-base, modernbert-small...), or a config.json (or a folder holding one)",
                         metavar="PRESET|CONFIG", deferred="default: tiny; a bare size gets the recipe's layout: "
                         "--recipe fast --model mini is modernbert-mini")
    objective: str = setting("mlm+nsp", "mlm+nsp (BERT), mlm+sop (ALBERT), mlm (RoBERTa), ltr (left to right), "
                             "electra (a small generator fills the masks, the model learns which tokens were "
                             "replaced), plm (XLNet's permutation LM: a random factorisation order per sequence, "
                             "its last 1/--plm-k predicted by the two-stream attention), mdlm (masked diffusion: a "
                             "mask rate t per sequence, every chosen token [MASK], the loss weighted by 1/t; "
                             "generates with `generate --sampler mdlm`), causal-then-masked (ltr for "
                             "--causal-fraction of the run, then mlm), hybrid (each batch ltr with probability "
                             "--causal-fraction, else mlm)", choices=tuple(OBJECTIVE_TABLE),
                             deferred=BY_RECIPE)
    packing: str = setting("full-sentences", "how mlm/ltr fill sequences", choices=("full-sentences", "doc-sentences"))
    vocab: str | None = setting(None, "tokenizer folder (default: the vocab the corpus was prepared with)",
                                metavar="DIR")
    batch_size: int = setting(32, "sequences per micro-batch and process", positive=True, maximum=MAX_BATCH)
    seq_len_schedule: str = setting("128:1.0", "sequence-length phases as fractions of the run, e.g. 128:0.9,512:0.1",
                                    metavar="LEN:FRAC,...")
    max_seq_length: int | None = setting(None, "one sequence length for the whole run: the same as "
                                         "--seq-len-schedule N:1 (give one of the two)", metavar="N", positive=True,
                                         maximum=MAX_LENGTH)
    eval_batches: int = setting(20, "held-out batches per evaluation (0: none)", non_negative=True, maximum=1_000_000)
    masking: str = setting("dynamic", "dynamic: new masks every epoch; static: --dupe-factor masked copies, drawn once",
                           choices=("dynamic", "static"))
    mask_rate: float = setting(0.15, "share of tokens masked", deferred=BY_RECIPE, minimum=0.0, maximum=1.0)
    mask_rate_schedule: str | None = setting(None, "mask-rate phases as fractions of the run, e.g. "
                                             "0.3:0.3,0.15:0.4,0.05:0.3 (instead of --mask-rate while training; "
                                             "held-out batches keep --mask-rate)", metavar="RATE:FRAC,...")
    causal_fraction: float = setting(0.5, "causal-then-masked: the share of the run trained left to right "
                                     "before masked; hybrid: the probability a batch is left to right",
                                     metavar="P", minimum=0.0, maximum=1.0)
    dupe_factor: int = setting(10, "static masking: how many differently masked copies of the corpus (BERT used 10)",
                               positive=True, maximum=1_000)
    whole_word: bool = setting(False, "mask whole words (all their pieces) together")
    span_masking: bool = setting(False, "mask SpanBERT spans: geometric lengths (p 0.2, at most 10), same "
                                 "--mask-rate budget")
    dropout: float | None = setting(None, "hidden and attention dropout for this run (bert: the model's, 0.1; "
                                    "fast: 0, as in Cramming and ModernBERT, which also lets CPU attention use SDPA's "
                                    "fused kernel)", metavar="P", deferred=BY_RECIPE, minimum=0.0, maximum=1.0)
    init_from: str | None = setting(None, "start from these weights instead of a random init", metavar="DIR")
    init: str = setting("model", "random init: the model family's own, or BERT's (normal, std 0.02, on every linear "
                        "and embedding; fast: bert, which leaves the unigram plateau sooner)", choices=INITS,
                        deferred=BY_RECIPE)
    generator_fraction: float = setting(0.25, "electra: the generator's width as a fraction of the model's (the "
                                        "paper: 1/4 to 1/2)", positive=True, maximum=1.0)
    disc_weight: float = setting(50.0, "electra: weight of replaced-token detection against the generator's MLM "
                                 "loss", positive=True, maximum=1_000.0)
    plm_k: int = setting(6, "plm: predict the last 1/K of each factorisation order (XLNet used 6; the RoBERTa and "
                         "ALBERT tables compare K = 6 and 7)", metavar="K", positive=True, minimum=2, maximum=1_000)
    plm_span: int = setting(5, "plm: the longest span of neighbouring tokens predicted together, as in the paper "
                            "(lengths uniform in 1..N, each span's tokens one after the other in the order; 1: "
                            "single tokens)", metavar="N", positive=True, maximum=512)
    plm_memory: int = setting(0, "plm: segment recurrence: the first N tokens of each sequence are its previous "
                              "segment, encoded without gradient into the memory the rest attends to (as XLNet "
                              "reuses the previous segment's states); the rest is predicted (0: none)",
                              metavar="N", non_negative=True, maximum=32_768)
    overwrite: bool = setting(False, "start again in an OUTPUT that holds another run (its contents are deleted)")
    recipe: str = setting(DEFAULT_RECIPE, "; ".join(f"{r.name}: {r.summary}" for r in RECIPES.values())
                          + ". A flag given here wins over the recipe", choices=tuple(RECIPES))
    train: TrainOptions = part(TrainOptions, pretrain_defaults, title="training",
                               deferred={"lr": BY_RECIPE, "warmup_steps": BY_RECIPE + "; fast: 6 % of --max-steps"})

    def __post_init__(self) -> None:
        # one length, spelt as every other verb spells it, is the one-phase schedule
        if self.max_seq_length is None:
            return
        default = next(f.default for f in fields(self) if f.name == "seq_len_schedule")
        if self.seq_len_schedule not in (default, f"{self.max_seq_length}:1.0"):
            raise SettingError("give {max_seq_length} or {seq_len_schedule}, not both", owner=PretrainConfig)
        self.seq_len_schedule = f"{self.max_seq_length}:1.0"

    @classmethod
    def from_options(cls, *, data: str, output: str, recipe: str = DEFAULT_RECIPE, **given: Any) -> "PretrainConfig":
        """A config from the settings given (fields of this class or of `TrainOptions`), the rest from `recipe`."""
        return cls(data=str(data), output=str(output), recipe=recipe, **recipe_options(recipe, given))


# A result is what the engine returns.
PretrainResult = FitResult


def pretrain(data: str | Path, output: str | Path, *, hooks: FaultHooks | None = None, **options: Any) -> FitResult:
    """Keyword front end of `run_pretraining`: ``pretrain("data/", "out/", model="mini", max_steps=1000)``;
    ``recipe="fast"`` fills in what is not given (see `pretraining/recipes.py`)."""
    return run_pretraining(PretrainConfig.from_options(data=str(data), output=str(output), **options), hooks=hooks)


# ---- small pieces ------------------------------------------------------------------------------------------------
def parse_duration(text: str | float | int | None) -> float | None:
    """'90', '90s', '30m', '1.5h', '1h30m' -> seconds."""
    if text is None or isinstance(text, (int, float)):
        return None if text is None else float(text)
    text = text.strip().lower()
    if re.fullmatch(r"[\d.]+", text):
        return float(text)
    parts = re.findall(r"([\d.]+)\s*([hms])", text)
    if not parts or "".join(n + u for n, u in parts) != re.sub(r"\s+", "", text):
        raise ValueError(f"cannot read the duration {text!r}; use e.g. 90s, 30m, 1.5h or 1h30m")
    return sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)


def parse_schedule(text: str) -> list[tuple[int, float]]:
    """'128:0.9,512:0.1' -> [(128, 0.9), (512, 0.1)]; the fractions must add up to 1."""
    phases = []
    for phase in str(text).split(","):
        length, _, frac = phase.strip().partition(":")
        try:
            phases.append((int(length), float(frac) if frac else 1.0))
        except ValueError:
            raise ValueError(f"cannot read the sequence-length schedule {text!r}; use e.g. 128:0.9,512:0.1") from None
    if abs(sum(f for _, f in phases) - 1.0) > 1e-6 or any(f <= 0 for _, f in phases):
        raise SettingError("the fractions of {seq_len_schedule} {got!r} must be positive and add up to 1",
                           owner=PretrainConfig, got=text)
    return phases


def seq_len_at(phases: list[tuple[int, float]], progress: float) -> int:
    """The phase's sequence length at `progress` (0..1) through the run."""
    return phase_value(phases, progress)


def check_mask_rate_schedule(cfg: PretrainConfig) -> None:
    """A readable schedule, for an objective that masks at a rate (ltr, plm and mdlm have none)."""
    if not cfg.mask_rate_schedule:
        return
    objective = OBJECTIVE_TABLE[cfg.objective]
    if objective.left_to_right or objective.permuted or objective.diffusion:
        raise SettingError("{mask_rate_schedule} needs an objective that masks at a rate; {objective} {got} has "
                           "none", owner=PretrainConfig, got=cfg.objective)
    try:
        parse_rate_schedule(cfg.mask_rate_schedule)
    except ValueError as err:
        raise SettingError("{mask_rate_schedule}: {why}", owner=PretrainConfig, why=str(err)) from None


def resolve_vocab(data: str | Path, vocab: str | None) -> str:
    """--vocab, else tokenizer files inside the data folder, else the folder `prepare` recorded in its manifest."""
    from bertforge.tokenization.auto import TOKENIZER_FILES

    def has_tokenizer(folder: Path) -> bool:
        return any((folder / name).is_file() for name, _ in TOKENIZER_FILES)

    if vocab:
        return vocab
    data = Path(data)
    if has_tokenizer(data):
        return str(data)
    source = load_manifest(data).get("vocab", {}).get("source")
    if source and has_tokenizer(Path(source)):
        return source
    raise SettingError("{path} does not say which vocab it was prepared with; pass {vocab} DIR", owner=PretrainConfig,
                       path=data)


def build_model(cfg: PretrainConfig, tokenizer: Any, max_len: int) -> torch.nn.Module:
    """The family's pre-training class (BERT: MLM+NSP, ALBERT: MLM+SOP, RoBERTa/DistilBERT: MLM)."""
    from bertforge.config import dropout_overrides
    from bertforge.model.auto import family, model_class_for, preset_config, read_model_type
    vocab_size = len(tokenizer.vocab)
    if cfg.dropout is not None and not 0.0 <= cfg.dropout < 1.0:
        raise SettingError("{dropout} must be in [0, 1), got {got}", owner=PretrainConfig, got=cfg.dropout)
    check_init(cfg.init)  # here too: a run from --init-from never reaches `reinitialise`
    dropout = dropout_overrides(cfg.dropout)
    if OBJECTIVE_TABLE[cfg.objective].generator:
        model = _build_electra(cfg, tokenizer, dropout)
    elif OBJECTIVE_TABLE[cfg.objective].permuted:
        model = _build_xlnet(cfg, tokenizer, dropout)
    elif cfg.init_from:
        from bertforge.checkpoint import quiet_loading
        with quiet_loading():  # the run says itself which heads are new and which of them it trains (init_note)
            model = model_class_for(cfg.init_from, "pretraining").from_pretrained(cfg.init_from, **dropout)
    else:
        path = config_file(cfg.model)
        if path.suffix == ".json" or path.is_file():
            config = family(read_model_type(path)).config_class.from_json_file(path)
            for name, value in dropout.items():
                setattr(config, name, value)
        else:
            config = preset_config(cfg.model, vocab_size=vocab_size, pad_token_id=tokenizer.pad_token_id, **dropout)
            if "sep_token_id" in config.field_names():  # Longformer's QA head ends the question at this id
                config.sep_token_id = tokenizer.sep_token_id
        model = family(config.model_type).model_class("pretraining")(config)
        reinitialise(model, cfg.init)
    if model.config.vocab_size < vocab_size:
        raise ValueError(f"the model has {model.config.vocab_size} token embeddings but the vocab has {vocab_size}")
    longest = getattr(model.config, "max_sequence_length", model.config.max_position_embeddings)
    if longest < max_len:
        raise SettingError("{seq_len_schedule} asks for {n} tokens but the model takes at most {longest} "
                           "({positions} position embeddings)", owner=PretrainConfig, n=max_len, longest=longest,
                           positions=model.config.max_position_embeddings)
    if OBJECTIVE_TABLE[cfg.objective].sentence_task and not hasattr(model, "nsp"):
        raise SettingError("objective {given} needs a sentence-pair head, which {model} lacks; use {objective} mlm "
                           "(or ltr)", owner=PretrainConfig, given=cfg.objective, model=type(model).__name__)
    return model


def check_init(init: str) -> None:
    if init not in INITS:
        raise SettingError("{init} must be one of {inits}, got {got!r}", owner=PretrainConfig, inits=", ".join(INITS),
                           got=init)


def reinitialise(model: torch.nn.Module, init: str) -> None:
    """`bert`: BERT's init on every linear and embedding (normal, std `initializer_range`), whatever the family.
    ModernBERT's own (truncated, output projections scaled down by depth) left the race's mini on the unigram
    plateau for hundreds of steps longer (docs/RESULTS.md); `model` keeps the family's."""
    check_init(init)
    if init == "bert":
        from bertforge.model.bert import BertPreTrainedModel
        model.apply(lambda module: BertPreTrainedModel._init_module(model, module))


def _build_electra(cfg: PretrainConfig, tokenizer: Any, dropout: dict[str, float]) -> torch.nn.Module:
    """ELECTRA: a generator `generator_fraction` of the discriminator's width, sharing its embeddings. `--model
    mini` means an ELECTRA of BERT-mini's shape (the discriminator); a config.json or an ELECTRA folder works too."""
    from bertforge.model.auto import preset_config
    from bertforge.model.electra import ElectraConfig
    from bertforge.model.electra_pretraining import ElectraPretrainingModel, build_electra_pretraining
    if cfg.init_from:
        return ElectraPretrainingModel.from_pretrained(cfg.init_from, disc_weight=cfg.disc_weight, **dropout)
    path = config_file(cfg.model)
    if path.suffix == ".json" or path.is_file():
        config = ElectraConfig.from_json_file(path)
        for name, value in dropout.items():
            setattr(config, name, value)
    else:
        name = cfg.model if cfg.model.startswith("electra-") else f"electra-{cfg.model.rpartition('-')[2]}"
        config = preset_config(name, vocab_size=len(tokenizer.vocab), pad_token_id=tokenizer.pad_token_id, **dropout)
    return build_electra_pretraining(config, generator_fraction=cfg.generator_fraction, disc_weight=cfg.disc_weight)


def _build_xlnet(cfg: PretrainConfig, tokenizer: Any, dropout: dict[str, float]) -> torch.nn.Module:
    """PLM trains an `XLNetLMHeadModel`: `--model mini` means XLNet at BERT-mini's shape; an XLNet config.json,
    an `xlnet-*` preset or --init-from an XLNet folder work too; any other family is refused."""
    from bertforge.config import PRESETS
    from bertforge.model.auto import family, preset_config, read_model_type
    from bertforge.model.xlnet import XLNetLMHeadModel
    if cfg.init_from:
        if read_model_type(config_file(cfg.init_from)) != "xlnet":
            raise SettingError("{objective} plm trains XLNet; {init_from} {path} is not an XLNet folder",
                               owner=PretrainConfig, path=cfg.init_from)
        return XLNetLMHeadModel.from_pretrained(cfg.init_from, **dropout)
    path = config_file(cfg.model)
    if path.suffix == ".json" or path.is_file():
        config = family(read_model_type(path)).config_class.from_json_file(path)
        for name, value in dropout.items():
            setattr(config, name, value)
    else:
        name = f"xlnet-{cfg.model}" if cfg.model in PRESETS else cfg.model
        config = preset_config(name, vocab_size=len(tokenizer.vocab), pad_token_id=tokenizer.pad_token_id, **dropout)
    if config.model_type != "xlnet":
        raise SettingError("{objective} plm trains XLNet's two-stream attention; {model} {name} is a "
                           "{family} model (give a size such as mini, or xlnet-mini)", owner=PretrainConfig,
                           name=cfg.model, family=config.model_type)
    model = XLNetLMHeadModel(config)
    reinitialise(model, cfg.init)
    return model


def check_init_vocab(init_from: str, data: str, tokenizer: Any) -> None:
    """Refuse --init-from weights trained with another vocabulary than the corpus's ids mean: every id would
    silently look up some other token's embedding."""
    from bertforge.data.shards import vocab_sha256
    try:
        theirs = load_tokenizer(init_from)
    except (FileNotFoundError, ValueError):
        return  # no tokenizer beside the weights: only the embedding count can be checked (build_model does)
    if vocab_sha256(theirs) != vocab_sha256(tokenizer):
        raise SettingError("{init_from} {path} comes with another vocabulary ({theirs} tokens) than the one {data_path} "
                           "was prepared with ({ours} tokens); prepare the corpus again with {vocab} {path}",
                           owner=PretrainConfig, path=init_from, theirs=len(theirs.vocab), data_path=data,
                           ours=len(tokenizer.vocab))


def init_note(model: torch.nn.Module, cfg: PretrainConfig) -> str:
    """Where --init-from weights came from, and which heads start new: an encoder checkpoint (e.g. a sentence
    encoder) has no MLM head, and --objective mlm/ltr never trains the sentence-pair head."""
    from bertforge.checkpoint import newly_initialized
    new = newly_initialized(model)
    note = f"initialised from {cfg.init_from}"
    sentence = [n for n in new if "seq_relationship" in n or "sop_classifier" in n]
    trained = [n for n in new if n not in sentence or OBJECTIVE_TABLE[cfg.objective].sentence_task]
    if trained:
        note += f"; new, trained by this run: {', '.join(trained)}"
    if len(trained) < len(new):
        note += (f"; new and left untrained (--objective {cfg.objective} has no sentence task): "
                 f"{', '.join(n for n in new if n not in trained)}")
    return note


def next_batch(dataset: PretrainingDataset) -> dict[str, torch.Tensor]:
    """The next batch, rolling over into the next epoch. The position lives in the dataset, so a fresh
    iterator per batch is correct and survives a change of sequence length."""
    for _ in range(2):
        for batch in dataset:
            return batch
    raise RuntimeError("the training split yields no batches")


def model_inputs(batch: dict[str, torch.Tensor], objective: str, device: torch.device) -> dict[str, Any]:
    inputs = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
    if OBJECTIVE_TABLE[objective].left_to_right:
        inputs["causal"] = True  # labels[i] is already token i + 1
    return inputs


def add_pretraining_metrics(sums: dict[str, float], out: Any, batch: dict[str, torch.Tensor]) -> None:
    """Add one batch's MLM (or LTR) hits and loss, and NSP/SOP hits and loss, to running sums."""
    labels = batch["labels"]
    n = int((labels != -100).sum())
    # MLM-only families (RoBERTa, DistilBERT) return MaskedLMOutput: logits/loss instead
    logits = getattr(out, "prediction_logits", None)
    logits, mlm_loss = (out.logits, out.loss) if logits is None else (logits, out.mlm_loss)
    target = labels[labels != -100].to(logits.device)
    # "the target's logit is the row's max": one max pass, 4x cheaper than argmax over 30k columns on CPU;
    # a tie for the max (argmax would pick the lower index) counts as a hit
    logits = logits.detach()
    hit = logits.gather(-1, target[:, None]).squeeze(-1) >= logits.amax(-1)
    _add(sums, mlm_n=n, mlm_correct=float(hit.sum()), mlm_loss=float(mlm_loss.detach()) * n)
    if getattr(out, "nelbo", None) is not None:  # MDLM: the bound per token of the batch
        _add(sums, nelbo=float(out.nelbo) * out.nelbo_tokens, nelbo_tokens=out.nelbo_tokens)
    if getattr(out, "disc_loss", None) is not None:  # ELECTRA's discriminator, per micro-batch
        _add(sums, disc_batches=1, disc_loss=float(out.disc_loss.detach()), disc_acc=float(out.disc_accuracy),
             replaced=float(out.replaced_fraction))
    if "next_sentence_label" in batch:
        nsl = batch["next_sentence_label"]
        _add(sums, nsp_n=nsl.numel(),
             nsp_correct=float((out.seq_relationship_logits.argmax(-1).cpu() == nsl).sum()),
             nsp_loss=float(out.nsp_loss.detach()) * nsl.numel())


def _add(sums: dict[str, float], **values: float) -> None:
    for k, v in values.items():
        sums[k] = sums.get(k, 0.0) + float(v)


def summarize_pretraining(s: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    if s.get("mlm_n"):
        out["mlm_loss"] = s["mlm_loss"] / s["mlm_n"]
        out["mlm_acc"] = s["mlm_correct"] / s["mlm_n"]
    if s.get("nsp_n"):
        out["nsp_loss"] = s["nsp_loss"] / s["nsp_n"]
        out["nsp_acc"] = s["nsp_correct"] / s["nsp_n"]
    if s.get("nelbo_tokens"):
        out["nelbo"] = s["nelbo"] / s["nelbo_tokens"]
    if s.get("disc_batches"):
        for key in ("disc_loss", "disc_acc", "replaced"):
            out[key] = s[key] / s["disc_batches"]
    return out


@torch.no_grad()
def evaluate(model: torch.nn.Module, dataset: PretrainingDataset, batches: int, device: torch.device,
             objective: str, autocast, plm: PermutationConfig | None = None,
             step: CorruptingStep | None = None) -> dict[str, float]:
    """MLM (or LTR, or PLM: `plm`) accuracy and perplexity, and NSP/SOP accuracy, on the first `batches`
    held-out batches. The held-out masks (and orders) are a function of the example (the batch's position),
    so every evaluation sees the same questions."""
    was_training = model.training
    model.eval()
    dataset.load_state_dict({**dataset.state_dict(), "epoch": 0, "index": 0})
    sums: dict[str, float] = {}
    for i, batch in enumerate(dataset):
        if i >= batches:
            break
        if plm is not None:
            batch = plm_batch(batch, dataset, plm)
        if step is not None:
            batch = step(batch, dataset, heldout=True)
        with autocast():
            if step is not None:
                out = step.forward(model, batch, device)
            else:
                out = (plm_forward(model, batch, device) if plm is not None
                       else model(**model_inputs(batch, objective, device)))
        add_pretraining_metrics(sums, out, batch)
    model.train(was_training)
    result = summarize_pretraining(sums)
    if "mlm_loss" in result:
        result["perplexity"] = math.exp(min(result["mlm_loss"], 50.0))
    if "nelbo" in result:  # MDLM: exp of the NELBO bounds the perplexity from above
        result["perplexity_bound"] = math.exp(min(result["nelbo"], 50.0))
    return result




def heldout_scores(folder: str | Path, data: str | Path, objective: str, batches: int = 20, *, seed: int = 0,
                   batch_size: int = 32, max_seq_length: int = 128, mask_rate: float = 0.15) -> dict[str, float]:
    """A saved pre-trained model's held-out numbers under `objective` on `data`'s held-out split: what
    `--eval-batches` reports during a run (MLM loss and perplexity; LTR's; MDLM's NELBO and the perplexity bound
    it gives), for a finished checkpoint. The same seed gives the same sequences to every objective that packs
    them alike, so an MDLM bound and a left-to-right perplexity are over the same text."""
    from bertforge.model.auto import model_class_for
    if objective not in OBJECTIVE_TABLE or OBJECTIVE_TABLE[objective].permuted or OBJECTIVE_TABLE[objective].generator:
        raise SettingError("{objective} must be one of mlm, mlm+nsp, mlm+sop, ltr, mdlm, causal-then-masked or "
                           "hybrid here, got {got!r}", owner=PretrainConfig, got=objective)
    table = OBJECTIVE_TABLE[objective]
    model = model_class_for(folder, "pretraining").from_pretrained(folder).eval()
    dataset = PretrainingDataset(data, load_tokenizer(folder), objective=table.batches, batch_size=batch_size,
                                 max_seq_length=max_seq_length, masking=MaskingConfig(rate=mask_rate), seed=seed,
                                 split="heldout")
    step = CorruptingStep(table, 0.5, mask_rate) if table.diffusion or table.mix else None
    device = next(model.parameters()).device
    return evaluate(model, dataset, batches, device, objective, Precision("fp32", device).autocast, step=step)


# ---- the stage ---------------------------------------------------------------------------------------------------
class CorpusStage(Stage):
    """What every stage reading a prepared corpus shares: its batches and their position, and the held-out
    MLM loss as the score (lower is better)."""

    train_data: PretrainingDataset

    def next_batch(self) -> dict[str, torch.Tensor]:
        return next_batch(self.train_data)

    def score(self, metrics: dict[str, float]) -> float | None:
        return -metrics["mlm_loss"] if "mlm_loss" in metrics else None

    def state_dict(self) -> dict[str, Any]:
        return self.train_data.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.train_data.load_state_dict(state)


class PretrainStage(CorpusStage):
    """A pre-training objective on a prepared corpus: batches, loss, metrics and held-out evaluation."""

    name = "pretrain"

    def __init__(self, cfg: PretrainConfig, model: torch.nn.Module, tokenizer: Any, train_data: PretrainingDataset,
                 heldout: PretrainingDataset | None, precision: Precision) -> None:
        self.cfg, self.model, self.tokenizer = cfg, model, tokenizer
        self.train_data, self.heldout, self.precision = train_data, heldout, precision
        self.phases = parse_schedule(cfg.seq_len_schedule)
        self.device = next(model.parameters()).device
        objective = OBJECTIVE_TABLE[cfg.objective]
        if not objective.sentence_task and not objective.generator:  # mlm, ltr: the head is in no loss
            freeze_sentence_head(model)
        self.plm = (PermutationConfig(k=cfg.plm_k, max_span=cfg.plm_span, memory=cfg.plm_memory)
                    if objective.permuted else None)
        self.rates = parse_rate_schedule(cfg.mask_rate_schedule) if cfg.mask_rate_schedule else None
        self.step = (CorruptingStep(objective, cfg.causal_fraction, cfg.mask_rate)
                     if objective.diffusion or objective.mix else None)
        # held-out batches of the mixed objectives: masked, at --mask-rate, whatever the schedule says now
        self.heldout_step = (CorruptingStep(objective, cfg.causal_fraction, cfg.mask_rate)
                             if self.step is not None else None)

    def next_batch(self) -> dict[str, torch.Tensor]:
        batch = super().next_batch()
        if self.step is not None:
            return self.step(batch, self.train_data)
        return plm_batch(batch, self.train_data, self.plm) if self.plm is not None else batch

    def run_record(self) -> dict[str, Any]:
        c = self.cfg
        return {"objective": c.objective, "packing": c.packing, "model": c.model, "batch_size": c.batch_size,
                "masking": c.masking, "mask_rate": c.mask_rate, "dupe_factor": c.dupe_factor,
                "whole_word": c.whole_word, "span_masking": c.span_masking, "seq_len_schedule": c.seq_len_schedule,
                "dropout": c.dropout, "init_from": c.init_from, "data": data_fingerprint(c.data),
                **({"generator_fraction": c.generator_fraction, "disc_weight": c.disc_weight}
                   if OBJECTIVE_TABLE[c.objective].generator else {}),
                **({"plm_k": c.plm_k, "plm_span": c.plm_span, "plm_memory": c.plm_memory}
                   if OBJECTIVE_TABLE[c.objective].permuted else {}),
                **({"mask_rate_schedule": c.mask_rate_schedule} if c.mask_rate_schedule else {}),
                **({"causal_fraction": c.causal_fraction} if OBJECTIVE_TABLE[c.objective].mix else {})}

    def loss(self, net: torch.nn.Module, batch: dict[str, torch.Tensor]) -> Any:
        if self.plm is not None:
            return plm_forward(net, batch, self.device)
        if self.step is not None:
            return self.step.forward(net, batch, self.device)
        return net(**model_inputs(batch, self.cfg.objective, self.device))

    def save(self, folder: Path) -> None:
        super().save(folder)
        if OBJECTIVE_TABLE[self.cfg.objective].generator and self.tokenizer is not None:
            self.tokenizer.save_pretrained(folder / "generator")  # the generator is a fill-mask model of its own

    def load_weights(self, folder: Path) -> None:
        if hasattr(self.model, "load_weights"):  # ELECTRA: two networks in two folders
            self.model.load_weights(folder)
        else:
            super().load_weights(folder)

    def add_metrics(self, sums: dict[str, float], out: Any, batch: dict[str, torch.Tensor]) -> None:
        add_pretraining_metrics(sums, out, batch)

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        return {**summarize_pretraining(sums), "seq_len": self.train_data.max_seq_length}

    def set_progress(self, fraction: float) -> None:
        self.train_data.set_max_seq_length(seq_len_at(self.phases, fraction))
        rate = rate_at(self.rates, fraction) if self.rates else self.cfg.mask_rate
        if self.step is not None:
            self.step.progress, self.step.rate = fraction, rate
        elif self.rates:  # the corpus masks its own batches: at the scheduled rate from now on
            self.train_data.masking = replace(self.train_data.masking, rate=rate)
            self.train_data.max_predictions = self.train_data.masking.predictions_for(self.train_data.max_seq_length)

    def evaluate(self) -> dict[str, float]:
        if self.heldout is None:
            return {}
        self.heldout.set_max_seq_length(self.train_data.max_seq_length)
        return evaluate(self.model, self.heldout, self.cfg.eval_batches, self.device, self.cfg.objective,
                        self.precision.autocast, self.plm, self.heldout_step)

    def postfix(self, values: dict[str, float]) -> dict[str, str]:
        shown = {"mlm_acc": f"{values.get('mlm_acc', 0):.3f}"}
        if "nsp_acc" in values:
            shown[f"{OBJECTIVE_TABLE[self.cfg.objective].sentence_task}_acc"] = f"{values['nsp_acc']:.3f}"
        return shown


def freeze_sentence_head(model: torch.nn.Module) -> list[str]:
    """Mark the pooler and the NSP/SOP head of a BERT-layout model as not trained, for an objective without a
    sentence task (mlm, ltr): their output is in no loss, so they get no gradient, and DDP, which reduces the
    gradient of every parameter that requires one, would wait for theirs forever. Returns their names."""
    frozen = []
    for name, param in model.named_parameters():
        if name.startswith(("nsp.", "bert.pooler.")):
            param.requires_grad_(False)
            frozen.append(name)
    return frozen


def data_fingerprint(data: str | Path) -> str:
    """What identifies a prepared corpus: its manifest (which holds every shard's sha256)."""
    return hashlib.sha256((Path(data) / MANIFEST).read_bytes()).hexdigest()[:16]


def build_stage(cfg: PretrainConfig, session: Session) -> tuple[PretrainStage, list[str]]:
    """The stage `run_pretraining` trains: model, tokenizer, training and held-out batches; and the notes the run
    reports (held-out evaluation skipped, where --init-from weights came from)."""
    opts = cfg.train
    phases = parse_schedule(cfg.seq_len_schedule)
    tokenizer = load_tokenizer(resolve_vocab(cfg.data, cfg.vocab))
    if cfg.init_from:
        check_init_vocab(cfg.init_from, cfg.data, tokenizer)
    torch.manual_seed(opts.seed)
    model = build_model(cfg, tokenizer, max(n for n, _ in phases)).to(session.device)
    masking = MaskingConfig(rate=cfg.mask_rate, whole_word=cfg.whole_word, mode=cfg.masking,
                            dupe_factor=cfg.dupe_factor, spans=cfg.span_masking)
    info = session.info
    data_objective = OBJECTIVE_TABLE[cfg.objective].batches  # ELECTRA trains on MLM's batches
    train_data = PretrainingDataset(cfg.data, tokenizer, objective=data_objective, packing=cfg.packing,
                                    max_seq_length=phases[0][0], batch_size=cfg.batch_size, masking=masking,
                                    seed=opts.seed, rank=info.rank, world_size=info.world_size)
    notes = []
    heldout = None
    if cfg.eval_batches > 0 and session.is_main:
        try:
            heldout = PretrainingDataset(cfg.data, tokenizer, objective=data_objective, packing=cfg.packing,
                                         max_seq_length=phases[0][0], batch_size=cfg.batch_size,
                                         masking=MaskingConfig(rate=cfg.mask_rate, whole_word=cfg.whole_word,
                                                               spans=cfg.span_masking),
                                         seed=opts.seed, split="heldout")
        except ValueError as err:
            notes.append(f"held-out evaluation skipped: {err}")
    if cfg.init_from:
        notes.append(init_note(model, cfg))
    stage = PretrainStage(cfg, model, tokenizer, train_data, heldout, session.precision(opts.precision))
    return stage, notes


def run_pretraining(cfg: PretrainConfig, hooks: FaultHooks | None = None) -> FitResult:
    """Build the model and the data, then train them with the engine (resuming OUTPUT's run if it has one)."""
    opts = cfg.train
    opts.check()
    parse_schedule(cfg.seq_len_schedule)
    check_mask_rate_schedule(cfg)
    if cfg.eval_batches < 0:
        raise SettingError("{eval_batches} must be 0 or more, got {got}", owner=PretrainConfig, got=cfg.eval_batches)
    if OBJECTIVE_TABLE[cfg.objective].permuted and cfg.plm_k < 2:
        raise SettingError("{plm_k} must be at least 2 (the last 1/K of each order is predicted), got {got}",
                           owner=PretrainConfig, got=cfg.plm_k)
    # every input resolved before OUTPUT is claimed: the vocab a corpus names is read too, so --overwrite
    # must not empty it
    inputs = (cfg.data, resolve_vocab(cfg.data, cfg.vocab), cfg.init_from, cfg.model)

    def build(session: Session, out: Path) -> Built:
        stage, notes = build_stage(cfg, session)
        return Built(stage, notes=notes)
    return train(cfg, build, verb="pretrain", inputs=inputs, hooks=hooks)
