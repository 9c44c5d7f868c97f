"""`evaluate`: one folder scored on one labelled split, as `bertforge evaluate` does: a predictor folder with its
task's official metrics, or (`task` sts / retrieval) the sentence embeddings of any encoder folder.
`EvaluateSettings` says everything one such run takes (its flags are derived from it); `evaluate(settings)`
checks them, scores, and with `output` writes metrics.json (an `EvaluationReport`) and the per-example
predictions."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from bertforge.evaluation.evaluation_report import EMBEDDING_TASKS, EvaluationReport
from bertforge.settings import MAX_SAMPLES, SettingError, check_settings, part, setting
from bertforge.tasks.embedding.evaluation import CORPUS_CHUNK
from bertforge.tasks.inference_options import InferenceOptions
from bertforge.tasks.long_inputs import LongInputOptions

__all__ = ["EMBEDDING_TASKS", "EvaluateSettings", "EvaluationReport", "evaluate"]

MAX_CORPUS_CHUNK = 16_777_216  # documents of one chunk of a memory-mapped corpus


@dataclass
class EvaluateSettings:
    """An evaluation: the folder, the labelled data, where the results go, how the model runs and how a
    predictor reads inputs longer than it takes."""

    model: str = setting(help="predictor folder (has task.json); for sts and retrieval, any encoder folder",
                         metavar="DIR")
    task: str | None = setting(None, "task name (default: the one the predictor was trained on); sts or retrieval "
                               "for sentence embeddings")
    data: str | None = setting(None, "the task's data folder (SQuAD: the dev JSON, article split)", metavar="PATH")
    eval: str | None = setting(None, "a labelled file to score (overrides --data)", metavar="FILE")
    split: str | None = setting(None, "the split of a --data folder (default: dev; retrieval: test)",
                                choices=("dev", "test", "train"))
    max_eval_samples: int | None = setting(None, "score only the first N examples", positive=True,
                                           maximum=MAX_SAMPLES, deferred="default: all")
    skip_bad_rows: bool = setting(False, "skip (and count) malformed rows instead of stopping at the first")
    vectors_dir: str | None = setting(None, "retrieval: write the corpus vectors to a memory-mapped .npy file in DIR "
                                      "(removed afterwards) and search them --corpus-chunk documents at a time, for "
                                      "corpora whose vectors do not fit in memory (the same exact ranking)",
                                      metavar="DIR")
    corpus_chunk: int = setting(CORPUS_CHUNK, "retrieval with --vectors-dir: documents embedded and searched per "
                                "chunk", positive=True, maximum=MAX_CORPUS_CHUNK, metavar="N")
    output: str | None = setting(None, "write metrics.json and per-example predictions here", metavar="DIR")
    overwrite: bool = setting(False, "empty --output first if it holds something else")
    inference: InferenceOptions = part(InferenceOptions, InferenceOptions, title="inference",
                                       hide=("max_chars",))
    long: LongInputOptions = part(LongInputOptions, LongInputOptions, title="long inputs (predictor folders)")

    @property
    def embedding_task(self) -> str | None:
        """sts or retrieval when the run scores sentence embeddings, else None."""
        task = (self.task or "").lower()
        return task if task in EMBEDDING_TASKS else None


def evaluate(settings: EvaluateSettings, say: Callable[[str], Any] = print,
             progress: bool = False) -> EvaluationReport:
    """Score `settings.model` as `settings` asks and return the report (what metrics.json holds); `say` gets the
    tables and the report as JSON, in the order `bertforge evaluate` prints them."""
    check_settings(settings)
    if settings.embedding_task:
        return _evaluate_embeddings(settings, say)
    return _evaluate_predictor(settings, say, progress)


def _claim(s: EvaluateSettings, recorded: dict[str, Any]) -> None:
    """Make OUTPUT this evaluation's (refusing another run's, or the same run on other input content)."""
    from bertforge.data.identity import INPUT_CONTENT, check_input_content
    from bertforge.outputs import claim_output, write_run_config
    content = check_input_content(s.output, "evaluate", (s.model, s.data, s.eval), s.overwrite)
    claim_output(s.output, verb="evaluate", overwrite=s.overwrite, settings=recorded, inputs=(s.model, s.data, s.eval))
    write_run_config(s.output, "evaluate", {**recorded, INPUT_CONTENT: content})


def _evaluate_predictor(s: EvaluateSettings, say: Callable[[str], Any], progress: bool) -> EvaluationReport:
    from bertforge.tasks.metrics.report import evaluation_reports, report_tables, write_reports
    from bertforge.tasks.prediction_files import write_eval_outputs
    from bertforge.tasks.predictor import Predictor
    from bertforge.tasks.registry import get_task
    split = s.split or "dev"
    if s.eval and split != "dev":
        raise SettingError("{split} {split_name} picks a file of a {data} folder; {eval} {file} is the file scored "
                           "(give one of them)", owner=EvaluateSettings, split_name=split, file=s.eval)
    if s.output and s.output.lower().endswith(".json"):
        raise SettingError("{output} {path}: expected a folder (metrics.json and the per-example predictions are "
                           "written inside it)", owner=EvaluateSettings, path=s.output)
    if s.output:
        _claim(s, {"model": s.model, "task": s.task, "data": s.data, "eval": s.eval, "split": split,
                   "max_eval_samples": s.max_eval_samples, "skip_bad_rows": s.skip_bad_rows,
                   "precision": s.inference.precision})
    predictor = Predictor.load(s.model, s.inference.device, s.inference.precision,
                               max_batch_tokens=s.inference.max_batch_tokens, long_inputs=s.long)
    predictor.settings.eval_batch_size = s.inference.batch_size
    kept: dict = {}
    report = EvaluationReport.from_dict(predictor.evaluate(
        data=s.data, eval_file=s.eval, split=split, max_samples=s.max_eval_samples, task=s.task,
        skip_bad_rows=s.skip_bad_rows, keep=kept, progress=progress))
    if report.note:
        say(f"NOTE: {report.note}")
    spec = get_task(report.task)
    class_reports = evaluation_reports(spec.head, kept, predictor.labels)
    for name, table in report_tables(class_reports).items():  # before the JSON, which ends the output
        say(f"{name}:\n{table}")
    say(_json(report))
    if s.output:
        from bertforge.outputs import mark_finished
        files = write_eval_outputs(s.output, spec, report.to_dict(), kept, predictor.labels)
        files += write_reports(s.output, class_reports)
        mark_finished(s.output)
        say("wrote " + ", ".join(str(f) for f in files))
    return report


def _json(report: EvaluationReport) -> str:
    """The report as printed: metrics.json's text (numpy scalars as numbers)."""
    import json
    return json.dumps(report.to_dict(), indent=2, default=float)


def _check_embedding_inputs(s: EvaluateSettings, task: str) -> None:
    if s.skip_bad_rows:
        raise SettingError("{skip_bad_rows} is for predictor evaluations; {task} {name} stops at a bad row",
                           owner=EvaluateSettings, name=task)
    if task == "retrieval" and (s.eval or not s.data):
        raise SettingError("{task} retrieval reads a BEIR folder: give {data} DIR (corpus.jsonl, queries.jsonl, "
                           "qrels/SPLIT.tsv), not {eval}", owner=EvaluateSettings)
    if task != "retrieval" and s.vectors_dir:
        raise SettingError("{vectors_dir} is for {task} retrieval (the corpus vectors); {task} {name} has none",
                           owner=EvaluateSettings, name=task)
    if task == "sts" and not (s.eval or s.data):
        raise SettingError("{task} sts needs {eval} FILE (sentence1, sentence2, score) or {data} DIR with SPLIT.tsv",
                           owner=EvaluateSettings)


def _evaluate_embeddings(s: EvaluateSettings, say: Callable[[str], Any]) -> EvaluationReport:
    """`task` sts|retrieval: the sentence embeddings of an encoder folder, scored; metrics.json with `output`."""
    from bertforge.serving.embeddings import SentenceEncoder
    from bertforge.tasks.embedding.data import read_beir, read_pairs, split_file
    from bertforge.tasks.embedding.evaluation import evaluate_retrieval, evaluate_sts
    task = s.embedding_task
    _check_embedding_inputs(s, task)
    split = s.split or ("test" if task == "retrieval" else "dev")
    if s.output:
        _claim(s, {"model": s.model, "task": task, "data": s.data, "eval": s.eval, "split": split,
                   "max_eval_samples": s.max_eval_samples, "precision": s.inference.precision})
    limit = s.max_eval_samples
    if task == "sts":
        source = s.eval or split_file(s.data, split)
        pairs, data = read_pairs(source)[:limit], None
    else:
        source, data = s.data, read_beir(s.data, split)
        if limit:
            data.queries = dict(list(data.queries.items())[:limit])
            data.qrels = {q: data.qrels[q] for q in data.queries}
    encoder = SentenceEncoder.load(s.model, device=s.inference.device, precision=s.inference.precision)

    def encode(texts):
        return encoder.encode(texts, batch_size=s.inference.batch_size)
    metrics = evaluate_sts(encode, pairs) if data is None else evaluate_retrieval(
        encode, data, vectors_dir=s.vectors_dir, corpus_chunk=s.corpus_chunk)
    report = EvaluationReport(task=task, model=str(s.model), files=[str(source)], split=split if not s.eval else None,
                              eval=metrics)
    say(_json(report))
    if s.output:
        from bertforge.outputs import mark_finished
        written = report.to_json(Path(s.output) / report.FILE, default=float)
        mark_finished(s.output)
        say(f"wrote {written}")
    return report
