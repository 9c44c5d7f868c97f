"""Every JSON file a verb reads, with a wrong type at every key: the loader answers with the project's one-line
error naming the file (a ValueError or OSError whose message names it), or loads — never a TypeError, KeyError,
AttributeError or IndexError escaping from deep inside, which the command line could only call an internal error.

Each case builds a valid folder once (module scope), checks it loads, then for every key path of its JSON file
(nested objects too, but not into big tables such as a vocabulary) and every replacement (a list, an object, a
string, null, a number), writes the changed file into a fresh copy and calls the loader the verbs use. The model
and tokenizer are tiny (2,000 tokens), so each of the several hundred loads takes milliseconds.
Not covered here: onnx.json (read leniently: a missing or odd field means "not declared") and glue's own
records.
"""
from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from predictor_folders import tiny_predictor

REPLACEMENTS = {"list": [1, "a"], "dict": {"a": 1}, "string": "x", "null": None, "number": 7}
BIG = 24  # an object with more keys than this (a vocabulary, a weight map) is one value: not walked into
ESCAPED = (TypeError, KeyError, AttributeError, IndexError, AssertionError, RecursionError, UnboundLocalError)


def key_paths(value: Any, prefix: tuple = (), depth: int = 4) -> Iterator[tuple]:
    """Every key path below `value` (dict keys; the first element of a list), not into objects larger than BIG."""
    if depth == 0:
        return
    if isinstance(value, dict) and len(value) <= BIG:
        for key, inner in value.items():
            yield (*prefix, key)
            yield from key_paths(inner, (*prefix, key), depth - 1)
    elif isinstance(value, list) and value and isinstance(value[0], (dict, list)):
        yield (*prefix, 0)
        yield from key_paths(value[0], (*prefix, 0), depth - 1)


def replaced(data: Any, path: tuple, new: Any) -> Any:
    out = copy.deepcopy(data)
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = copy.deepcopy(new)
    return out


class Case:
    """A valid folder, the JSON file in it to damage, and the loader to call on a damaged copy."""

    def __init__(self, name: str, build: Callable[..., Path], file: str, load: Callable[[Path], Any], *,
                 depth: int = 4) -> None:
        self.name, self.build, self.file, self.load, self.depth = name, build, file, load, depth


# ---- the folders and their loaders ----------------------------------------------------------------------------
def _model(out: Path, tiny_model: Path) -> Path:
    shutil.copytree(tiny_model, out)
    return out


def _load_model(folder: Path) -> None:
    from bertforge.model.auto import AutoModel
    AutoModel.from_pretrained(folder)


def _load_tokenizer(folder: Path) -> None:
    from bertforge.tokenization import load_tokenizer
    load_tokenizer(folder)("a sentence to encode")


def _sharded(out: Path, tiny_model: Path) -> Path:
    from safetensors.torch import load_file
    shutil.copytree(tiny_model, out)
    names = load_file(str(out / "model.safetensors"))
    (out / "model.safetensors").rename(out / "model-00001-of-00001.safetensors")
    (out / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": 1}, "weight_map": {n: "model-00001-of-00001.safetensors" for n in names}}))
    return out


def _load_sharded(folder: Path) -> None:
    from bertforge.evaluation.glue import model_fingerprint
    _load_model(folder)
    model_fingerprint(folder)


def _predictor(out: Path, small: Path, minilm_dir: Path) -> Path:
    return tiny_predictor(out, small, "sst2", "sequence_classification", ["0", "1"])


def _load_predictor(folder: Path) -> None:
    from bertforge.tasks.predictor import Predictor
    Predictor.load(folder, device="cpu").predict(["a fine film"])


def _st_folder(out: Path, tiny_model: Path) -> Path:
    from bertforge.tasks.embedding.pooling import Pooling
    shutil.copytree(tiny_model, out)
    Pooling("mean", True, 64).save(out, 32)
    return out


def _load_pooling(folder: Path) -> None:
    from bertforge.serving.embeddings import SentenceEncoder
    SentenceEncoder.load(folder).encode(["a text"])


def _dataset_dict(out: Path, tiny_model: Path) -> Path:
    (out / "train").mkdir(parents=True)
    (out / "dataset_dict.json").write_text(json.dumps({"splits": ["train"]}))
    return out


def _load_dataset_dict(folder: Path) -> None:
    from bertforge.data.records import RecordError, input_kind
    try:
        input_kind(folder)
    except RecordError as err:
        if "give one of them" not in str(err):  # the good file's own answer: a DatasetDict needs one split
            raise


def _vocab_run(out: Path, tiny_model: Path) -> Path:
    from bertforge.cli import main
    corpus = out.parent / f"{out.name}-corpus.txt"
    corpus.write_text("the cat sat on the mat .\n" * 40)
    assert main(["vocab", "--input", str(corpus), "--output", str(out), "--vocab-size", "120", "--no-progress"]) == 0
    return out


def _rerun_vocab(folder: Path) -> None:
    from bertforge.data.identity import check_input_content
    from bertforge.outputs import RunAlreadyFinished, claim_output, is_finished
    corpus = folder.parent / "vocab-corpus.txt"
    settings = {"input": [str(corpus)], "kind": "wordpiece", "vocab_size": 120, "cased": False,
                "min_frequency": 2, "unused": 99, "skip_bad_lines": False}
    check_input_content(folder, "vocab", [corpus], False)
    is_finished(folder)
    try:
        claim_output(folder, verb="vocab", overwrite=False, settings=settings, inputs=[corpus])
    except RunAlreadyFinished:
        pass


def _tokenizer_json(out: Path, small: Path, minilm_dir: Path) -> Path:
    """The small vocabulary as a tokenizer.json folder (the `tokenizers` library's BERT pipeline)."""
    from tokenizers.implementations import BertWordPieceTokenizer
    out.mkdir(parents=True)
    BertWordPieceTokenizer(str(small / "vocab.txt"), lowercase=True).save(str(out / "tokenizer.json"))
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(minilm_dir / name, out / name)
    return out


def _toy_run(out: Path, finished: bool) -> Path:
    from training.test_engine import ToyStage, run
    run(ToyStage(), out, max_steps=6, save_every=3, keep_checkpoints=5)
    if not finished:  # as a run killed after its step-3 checkpoint leaves it
        from bertforge.training import checkpointing as ckpt
        shutil.rmtree(dict(ckpt.list_checkpoints(out))[6])
        config = json.loads((out / "run_config.json").read_text())
        config.pop("status")
        (out / "run_config.json").write_text(json.dumps(config))
        (out / "training_summary.json").unlink()
    return out


def _resume_toy(folder: Path) -> None:
    from training.test_engine import ToyStage, run
    run(ToyStage(), folder, max_steps=6, save_every=3, keep_checkpoints=5)


def _prepared(out: Path, tiny_model: Path, minilm_dir: Path) -> Path:
    from bertforge.data import prepare_corpus
    text = out.parent / f"{out.name}-corpus.txt"
    text.write_text("".join(f"sentence {i} of the first document .\n" for i in range(30)) + "\n"
                    + "".join(f"line {i} of the second one .\n" for i in range(30)))
    prepare_corpus([text], minilm_dir, out, max_seq_length=32, show_progress=False, heldout_documents=1)
    return out


def _load_prepared(folder: Path) -> None:
    from bertforge.data.shards import CorpusSplit, load_manifest
    from bertforge.pretraining.pretrain import data_fingerprint
    load_manifest(folder)
    data_fingerprint(folder)
    for split in ("train", "heldout"):
        CorpusSplit(folder, split, verify=True)


CASES = [
    Case("config", _model, "config.json", _load_model),
    Case("tokenizer_config", _model, "tokenizer_config.json", _load_tokenizer),
    Case("shard-index", _sharded, "model.safetensors.index.json", _load_sharded),
    Case("task", _predictor, "task.json", _load_predictor),
    Case("predictor-config", _predictor, "config.json", _load_predictor),
    Case("modules", _st_folder, "modules.json", _load_pooling),
    Case("sentence_bert_config", _st_folder, "sentence_bert_config.json", _load_pooling),
    Case("pooling-config", _st_folder, "1_Pooling/config.json", _load_pooling),
    Case("dataset_dict", _dataset_dict, "dataset_dict.json", _load_dataset_dict),
    Case("run_config", _vocab_run, "run_config.json", _rerun_vocab),
    Case("tokenizer.json", _tokenizer_json, "tokenizer.json", _load_tokenizer),
    Case("tokenizer.json-config", _tokenizer_json, "tokenizer_config.json", _load_tokenizer),
    Case("training_state", lambda out, _: _toy_run(out, False), "checkpoints/step-3/training_state.json",
         _resume_toy),
    Case("training_summary", lambda out, _: _toy_run(out, True), "training_summary.json", _resume_toy),
    Case("manifest", _prepared, "manifest.json", _load_prepared),
]
NEEDS_MINILM = (_predictor, _tokenizer_json, _prepared)


@pytest.fixture(scope="module")
def small_model(tmp_path_factory, minilm_dir) -> Path:
    """A tiny random BERT with the first 2,000 tokens of the MiniLM vocabulary (every special token among them):
    a load takes milliseconds, so every damaged copy can go through the real loader."""
    import torch

    from bertforge import BertConfig, BertModel
    from bertforge.tokenization import BertTokenizer
    folder = tmp_path_factory.mktemp("small")
    lines = (minilm_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()[:2000]
    (folder / "vocab.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    tokenizer = BertTokenizer.from_pretrained(folder)
    torch.manual_seed(0)
    BertModel(BertConfig.preset("tiny", vocab_size=len(lines))).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def built(tmp_path_factory, small_model, minilm_dir) -> dict[str, Path]:
    tiny_model = small_model
    folders = {}
    for case in CASES:
        out = tmp_path_factory.mktemp("fuzz") / ("vocab" if case.build is _vocab_run else case.name)
        args = (out, tiny_model, minilm_dir) if case.build in NEEDS_MINILM else (out, tiny_model)
        folders[case.name] = case.build(*args)
    return folders


def check_loader(case: Case, folder: Path, scratch: Path) -> list[str]:
    """Every damaged copy of `case`'s file through its loader; returns what went wrong, one line each."""
    case.load(folder)  # the undamaged folder loads: the errors below are the damage's, not the case's
    data = json.loads((folder / case.file).read_text(encoding="utf-8"))
    problems = []
    paths = [()] + list(key_paths(data, depth=case.depth))
    for path in paths:
        for kind, new in REPLACEMENTS.items():
            damaged = new if path == () else replaced(data, path, new)
            if path != () and damaged == data:
                continue
            copy_dir = scratch / "copy"
            shutil.rmtree(copy_dir, ignore_errors=True)
            shutil.copytree(folder, copy_dir)
            (copy_dir / case.file).write_text(json.dumps(damaged), encoding="utf-8")
            where = f"{case.file} {'/'.join(map(str, path)) or '(whole file)'} = {kind}"
            try:
                case.load(copy_dir)
            except ESCAPED as err:
                problems.append(f"{where}: {type(err).__name__}: {err}")
            except (ValueError, OSError) as err:
                message = str(err)
                if "\n" in message.strip() or not (str(copy_dir) in message or Path(case.file).name in message):
                    problems.append(f"{where}: message names no file or is not one line: {message!r}")
            except Exception as err:  # noqa: BLE001 - anything else escaping is what the test is looking for
                problems.append(f"{where}: {type(err).__name__}: {err}")
    return problems


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_wrong_types_at_every_key_give_a_one_line_error_naming_the_file(case, built, tmp_path):
    problems = check_loader(case, built[case.name], tmp_path)
    assert not problems, f"{len(problems)} damaged files escaped:\n" + "\n".join(problems[:25])
