"""A fine-tuned output folder as a ready-to-use predictor: texts in, labels / spans / entities out.

The folder holds the model (HF layout), the tokenizer and `task.json` (task, head kind, label names,
lengths, SQuAD settings), so prediction needs nothing but the path: `Predictor.load(DIR).predict([...])`.
Loading checks the folder (see `validate_task` and `check_model`) so a broken or mismatched folder fails
with one line saying what is wrong, instead of predicting nonsense.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from bertforge.checkpoint import newly_initialized
from bertforge.config import CONFIG_NAME, ConfigError, read_model_config
from bertforge.device import Precision, placement
from bertforge.folder_files import FolderFileError, folder_has, read_folder_json
from bertforge.settings import SettingError
from bertforge.tasks.evaluation import EvalRun, InferenceSettings, evaluate_examples, run_model
from bertforge.tasks.inference_options import DEFAULT_MAX_BATCH_TOKENS, DEFAULT_MAX_CHARS
from bertforge.tasks.long_inputs import LongInputOptions, check_chunkable
from bertforge.tasks.prediction_inputs import PREDICT_BY_INPUTS
from bertforge.tasks.readers import GLUE_FORMATS
from bertforge.tasks.registry import HEADS, TASKS, TaskSpec, get_task
from bertforge.tasks.task_data import load_task_data

#: A predictor folder's own file: the task, head kind, label names and lengths the model was fine-tuned with.
TASK_FILE = "task.json"
_POSITIVE_INTS = ("max_seq_length", "doc_stride", "max_query_length", "max_answer_length", "n_best")


class PredictorError(ValueError):
    """A predictor folder (or task settings) that cannot be used; the message names the file and the field."""


# ---- the predictor folder: a model folder + task.json ------------------------------------------------------------
def is_predictor_folder(directory: str | Path) -> bool:
    """Whether `directory` holds a task.json (a regular file inside it): what makes a model folder a predictor."""
    return folder_has(directory, TASK_FILE)


def write_task_file(directory: str | Path, task: dict[str, Any]) -> Path:
    """Write `directory/task.json` atomically (read back by `read_task_file`)."""
    from bertforge.atomic import atomic_write_text
    path = Path(directory) / TASK_FILE
    atomic_write_text(path, json.dumps(task, indent=2) + "\n")
    return path


def read_task_file(directory: Path) -> dict[str, Any]:
    """`task.json` of a predictor folder as a dict, or a PredictorError naming what is wrong with it."""
    task_file = directory / TASK_FILE
    if not folder_has(directory, TASK_FILE):
        raise PredictorError(f"{directory} has no {TASK_FILE}: not a fine-tuned predictor folder "
                             "(make one with `bertforge finetune`)")
    try:
        task = read_folder_json(directory, TASK_FILE)
    except FolderFileError as err:
        raise PredictorError(str(err)) from None
    if not isinstance(task, dict):
        raise PredictorError(f"{task_file}: expected a JSON object, got {type(task).__name__}")
    return validate_task(task, str(task_file))


def validate_task(task: dict[str, Any], source: str = TASK_FILE) -> dict[str, Any]:
    """Check task settings field by field; returns a copy with `labels` as a list of names (a {"id": name}
    object is accepted and turned into the list)."""
    for key in ("task", "head"):
        if not isinstance(task.get(key), str):
            raise PredictorError(f"{source}: field {key!r} is missing (expected a string)")
    try:
        spec = get_task(task["task"])
    except KeyError:
        raise PredictorError(f"{source}: field 'task' is {task['task']!r}, not a known task "
                             f"({', '.join(TASKS)})") from None
    if task["head"] not in HEADS:
        raise PredictorError(f"{source}: field 'head' is {task['head']!r}; expected one of {', '.join(HEADS)}")
    if task["head"] != spec.head:
        raise PredictorError(f"{source}: field 'head' is {task['head']!r} but task {spec.name} needs {spec.head!r}")
    for key in _POSITIVE_INTS:
        value = task.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise PredictorError(f"{source}: field {key!r} must be a positive integer, got {value!r}")
    threshold = task.get("null_threshold")
    if threshold is not None and (not isinstance(threshold, (int, float)) or not np.isfinite(threshold)):
        raise PredictorError(f"{source}: field 'null_threshold' must be a finite number, got {threshold!r}")
    return {**task, "labels": _label_list(task.get("labels"), f"{source}: field 'labels'")}


def _label_list(labels: Any, where: str) -> list[str] | None:
    """Label names by id from a list, or from an {"0": name, "1": name} object with ids 0..n-1."""
    if labels is None:
        return None
    if isinstance(labels, dict):
        try:
            by_id = {int(k): v for k, v in labels.items()}
        except (TypeError, ValueError):
            raise PredictorError(f"{where}: an object must map label ids (0, 1, ...) to names, got keys "
                                 f"{list(labels)[:5]}") from None
        if sorted(by_id) != list(range(len(by_id))):
            raise PredictorError(f"{where}: label ids must be 0..{len(by_id) - 1}, got {sorted(by_id)[:10]}")
        labels = [by_id[i] for i in range(len(by_id))]
    if not isinstance(labels, list) or not all(isinstance(x, (str, int)) and not isinstance(x, bool)
                                               for x in labels):
        raise PredictorError(f"{where}: expected a list of label names (or an id -> name object), "
                             f"got {type(labels).__name__}")
    names = [str(x) for x in labels]
    if len(set(names)) != len(names):
        raise PredictorError(f"{where}: label names repeat: {names}")
    return names


def _config_labels(directory: Path) -> list[str] | None:
    """`id2label` of config.json, checked before the model class reads it."""
    config_file = directory / CONFIG_NAME
    try:
        config = read_model_config(directory)
    except (OSError, FolderFileError, ConfigError):
        return None  # the model loader reports an unreadable config with its own message
    if not isinstance(config, dict) or config.get("id2label") is None:
        return None
    id2label = config["id2label"]
    if not isinstance(id2label, dict):
        raise PredictorError(f"{config_file}: field 'id2label' must be an object {{\"0\": name, ...}}, "
                             f"got a {type(id2label).__name__}")
    return _label_list(id2label, f"{config_file}: field 'id2label'")


_HEAD_CLASSES = ("ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering", "ForMultipleChoice")


def check_saved_head(directory: Path, model_class: type, head: str) -> None:
    """config.json's `architectures` names the class that saved the weights; a task head other than the one
    task.json's head loads means the files disagree. A sequence classifier read as a token tagger has the very
    same weight shapes (classifier [labels, hidden]), so nothing else would notice: it would print nonsense."""
    try:
        saved = read_model_config(directory).get("architectures")
    except (OSError, FolderFileError, ConfigError, AttributeError):
        return  # the model loader reports an unreadable config with its own message
    name = saved[0] if isinstance(saved, list) and saved and isinstance(saved[0], str) else None
    kind = next((k for k in _HEAD_CLASSES if name and name.endswith(k)), None)
    if kind is not None and not model_class.__name__.endswith(kind):
        raise PredictorError(f"{directory / TASK_FILE}: field 'head' is {head!r} but {CONFIG_NAME} says the "
                             f"weights are a {name} head; the folder's task.json does not belong to its model")


def check_model(model, tokenizer, task: dict[str, Any], source: str) -> None:
    """Refuse a model that would predict nonsense: head weights that were never trained (absent from the
    checkpoint), NaN/inf weights, a label list that does not fit the head, token ids past the embedding
    table, or a sequence length past the position table."""
    fresh = newly_initialized(model)
    if fresh:
        raise PredictorError(f"{source}: the checkpoint lacks {', '.join(fresh[:4])}"
                             f"{' ...' if len(fresh) > 4 else ''} (the {task['head']} head would be random; "
                             "is this a fine-tuned predictor of this task?)")
    for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise PredictorError(f"{source}: weight {name} holds NaN or infinite values (a diverged or "
                                 "corrupt checkpoint)")
    config = getattr(model, "config", None)
    labels = task.get("labels")
    if config is not None and labels is not None and HEADS[task["head"]].labelled:
        if len(labels) != config.num_labels:
            raise PredictorError(f"{source}: {TASK_FILE} lists {len(labels)} labels but the {task['head']} head "
                                 f"has {config.num_labels} outputs")
    if config is not None:
        vocab = len(tokenizer)
        if vocab > config.vocab_size:
            raise PredictorError(f"{source}: the tokenizer has {vocab} tokens but the embedding table only "
                                 f"{config.vocab_size} rows (vocab.txt does not belong to this model)")
        length, most = task.get("max_seq_length"), model_positions(config)
        if length is not None and most is not None and length > most:
            raise PredictorError(f"{source}: {TASK_FILE} field 'max_seq_length' is {length} but the model has "
                                 f"{most} positions")


def model_positions(config) -> int | None:
    """The longest input a model config reads (RoBERTa's and Longformer's tables hold two rows more than that);
    None for XLNet, whose relative positions have no table."""
    if getattr(config, "model_type", None) == "xlnet":
        return None
    return getattr(config, "max_sequence_length", None) or getattr(config, "max_position_embeddings", None)


# ---- the predictor --------------------------------------------------------------------------------------------
class Predictor:
    """Model + tokenizer + task settings. `timing` holds the last call's example count, seconds and examples/s.

    `model` is any callable with `.eval()` that takes input_ids / token_type_ids / attention_mask and returns
    `.logits` (or `.start_logits` / `.end_logits`): a bertforge model, a `transformers` one, or an ONNX
    Runtime wrapper. Its device is its `device` attribute when it has one, else the CPU.
    """

    def __init__(self, model, tokenizer, task: dict[str, Any], path: Path | None = None, *,
                 device: torch.device | str | None = None, precision: Precision | str = "fp32",
                 max_chars: int = DEFAULT_MAX_CHARS, max_batch_tokens: int | None = DEFAULT_MAX_BATCH_TOKENS,
                 long_inputs: LongInputOptions | None = None) -> None:
        model.eval()
        self.model = model
        self.tokenizer = tokenizer
        self.task = validate_task(task, str(Path(path) / TASK_FILE) if path else "task settings")
        self.path = path
        self.spec = get_task(self.task["task"])
        self.labels: list[str] | None = self.task.get("labels")
        self.device, self.precision = placement(device, precision, model)
        if max_chars < 1:
            raise ValueError(f"max_chars must be at least 1, got {max_chars}")
        self.max_chars = max_chars
        self.settings = InferenceSettings(max_seq_length=self.task.get("max_seq_length"),
                                          doc_stride=self.task.get("doc_stride") or 128,
                                          max_query_length=self.task.get("max_query_length") or 64,
                                          max_answer_length=self.task.get("max_answer_length") or 30,
                                          n_best=self.task.get("n_best") or 20, max_batch_tokens=max_batch_tokens)
        self.read_long_inputs(long_inputs or LongInputOptions())
        self.timing: dict[str, float] = {}
        self._progress = False

    def read_long_inputs(self, options: LongInputOptions) -> None:
        """How inputs longer than the model reads are handled by later calls (`tasks/long_inputs.py`); a
        `max_seq_length` of their own replaces task.json's, up to the model's positions."""
        check_chunkable(self.head, options)
        self.settings.max_seq_length = self.task.get("max_seq_length")
        self.settings.doc_stride = self.task.get("doc_stride") or 128
        config = getattr(self.model, "config", None)
        length = options.max_seq_length
        most = model_positions(config) if config is not None else None
        if length is not None and most is not None and length > most:
            raise SettingError("{max_seq_length} is {got:,} but the model reads at most {most:,} tokens "
                               "(its position table)", owner=LongInputOptions, got=length, most=most)
        if length is not None:
            self.settings.max_seq_length = length
        if options.chunk_stride is not None and HEADS[self.head].chunking == "spans":
            self.settings.doc_stride = options.chunk_stride
        self.long_inputs = self.settings.long_inputs = options

    @classmethod
    def load(cls, directory: str | Path, device: torch.device | str = "auto", precision: Precision | str = "auto", *,
             max_chars: int = DEFAULT_MAX_CHARS,
             max_batch_tokens: int | None = DEFAULT_MAX_BATCH_TOKENS,
             long_inputs: LongInputOptions | None = None) -> "Predictor":
        """Read and check a predictor folder, and put the model on `device` ("auto": CUDA when present);
        `long_inputs` says how much of each input it reads and what happens to longer ones."""
        from bertforge.model.auto import model_class_for
        from bertforge.tokenization import load_tokenizer
        directory = Path(directory)
        if not directory.is_dir():
            raise FileNotFoundError(f"predictor folder not found: {directory}")
        task = read_task_file(directory)
        config_labels = _config_labels(directory)
        if task["labels"] is None and HEADS[task["head"]].labelled:
            task["labels"] = config_labels
        device, run_precision = placement(device, precision)
        model_class = model_class_for(directory, HEADS[task["head"]].model_role)
        check_saved_head(directory, model_class, task["head"])
        model = model_class.from_pretrained(directory)
        tokenizer = load_tokenizer(directory)
        check_model(model, tokenizer, task, str(directory))
        model.to(device)
        return cls(model, tokenizer, task, directory, device=device, precision=run_precision, max_chars=max_chars,
                   max_batch_tokens=max_batch_tokens, long_inputs=long_inputs)

    @property
    def head(self) -> str:
        return self.task["head"]

    # ---- prediction --------------------------------------------------------------------------------------------
    def predict(self, inputs: Sequence[Any], batch_size: int = 64, progress: bool = False) -> list[dict[str, Any]]:
        """One result dict per input, in input order.

        Inputs by head: a text or a (text, text_pair) tuple (classification / regression); a text or a
        list of words (NER); a (question, context) tuple (QA); a (context, [endings]) or
        (context, start, [endings]) tuple (multiple choice). Texts longer than `max_chars` are cut there
        before tokenization and their result says `"truncated": true`.
        """
        start = time.perf_counter()
        inputs = list(inputs)
        self._progress = progress
        results = PREDICT_BY_INPUTS[HEADS[self.head].inputs](self, inputs, batch_size) if inputs else []
        seconds = time.perf_counter() - start
        self.timing = {"n": len(inputs), "seconds": round(seconds, 4),
                       "examples_per_second": round(len(inputs) / max(seconds, 1e-9), 2)}
        return results

    def run_features(self, features, batch_size: int) -> list[Any]:
        """The model's outputs on encoded features, in order (batched by length, on the predictor's device)."""
        return run_model(self.model, features, batch_size, self.tokenizer.pad_token_id, device=self.device,
                         precision=self.precision, max_batch_tokens=self.settings.max_batch_tokens,
                         progress=self._progress)

    # ---- evaluation --------------------------------------------------------------------------------------------
    def evaluate(self, data: str | None = None, eval_file: str | None = None, split: str = "dev",
                 max_samples: int | None = None, task: str | None = None, skip_bad_rows: bool = False,
                 keep: dict[str, tuple[list[Any], EvalRun]] | None = None, progress: bool = False) -> dict[str, Any]:
        """Score this predictor on a labelled split with the task's official metric.

        Data of another task is refused unless it has the same head, label names and input kind (single
        texts or pairs): an SST-2 predictor scored on MRPC would give a number that means nothing. Pass a
        dict as `keep` to get, per eval set, its (examples, EvalRun) for writing per-example predictions.
        """
        try:
            spec = get_task(task) if task else self.spec
        except KeyError as err:
            raise ValueError(str(err).strip("\"'")) from None
        if spec.head != self.spec.head:
            raise ValueError(f"this predictor has a {self.spec.head} head ({self.spec.name}); task {spec.name} "
                             f"needs {spec.head}")
        data_ = load_task_data(spec, data, None, eval_file, skip_bad_rows=skip_bad_rows, need_train=False,
                               eval_split=split)
        report: dict[str, Any] = {"task": spec.name, "note": data_.note or None, "files": data_.files}
        for name, examples in data_.evals.items():
            examples = examples[:max_samples] if max_samples else examples
            self._check_fits(spec, examples, data_.files.get(name, name))
            runs: list[EvalRun] = []
            metrics, _ = evaluate_examples(self.model, self.tokenizer, spec, examples, self.settings, self.labels,
                                           device=self.device, precision=self.precision, keep=runs,
                                           progress=progress)
            report[name] = metrics
            if keep is not None:
                keep[name] = (examples, runs[0])
        return report

    def _check_fits(self, spec: TaskSpec, examples: Sequence[Any], source: str) -> None:
        """Refuse labelled data this predictor cannot score: unknown labels, or pairs vs single texts."""
        head = HEADS[spec.head]
        if head.gold == "label" and any(ex.label is None for ex in examples):
            raise ValueError(f"{source}: has rows without a label (a test split?); evaluate scores labelled data, "
                             "`bertforge predict` runs on unlabelled files")
        mine, theirs = _input_kind(self.spec.name), _input_kind(spec.name)
        if head.per_text and examples:
            theirs = "pairs" if examples[0].text_pair is not None else "single texts"
        if mine and theirs and mine != theirs:
            raise ValueError(f"{source}: this {self.spec.name} predictor reads {mine} but the data has {theirs}")
        if head.labelled and head.gold == "label" and self.labels is not None:
            unknown = sorted({str(ex.label) for ex in examples} - set(self.labels))
            if unknown:
                raise ValueError(f"{source}: labels {unknown[:5]} are not among this {self.spec.name} predictor's "
                                 f"labels {self.labels}")
        if head.labelled and head.gold == "tags" and self.labels is not None:
            unknown = sorted({t for ex in examples for t in ex.tags} - set(self.labels))
            if unknown:
                raise ValueError(f"{source}: tags {unknown[:5]} are not among this {self.spec.name} predictor's "
                                 f"labels {self.labels}")


def _input_kind(task: str) -> str | None:
    """"pairs" or "single texts" for GLUE tasks, None where the task name does not say."""
    fmt = GLUE_FORMATS.get(task)
    if fmt is None:
        return None
    return "single texts" if fmt.pair is None else "pairs"
