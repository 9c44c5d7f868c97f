"""Suites over tasks: `run_glue` fine-tunes and scores one checkpoint on the GLUE benchmark under a named
protocol and writes glue.json / glue.md / glue.png (see `bertforge.evaluation.glue` for the format)."""
from bertforge.evaluation.difference import Difference, difference
from bertforge.evaluation.glue_result import GlueResult, GlueTaskResult
from bertforge.evaluation.glue import GlueSettings, assemble, model_fingerprint, run_glue, task_entry
from bertforge.evaluation.protocols import PROTOCOLS, Protocol, get_protocol
from bertforge.evaluation.report import compare, load_result, write_report
from bertforge.evaluation.scores import glue_average, majority_baseline, official_metrics, summarize_runs, task_score

__all__ = ["Difference", "GlueResult", "GlueSettings", "GlueTaskResult", "PROTOCOLS", "Protocol", "assemble", "compare",
           "difference", "get_protocol", "glue_average", "load_result", "majority_baseline", "model_fingerprint",
           "official_metrics", "run_glue", "summarize_runs", "task_entry", "task_score", "write_report"]
