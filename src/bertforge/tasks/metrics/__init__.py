"""The official evaluation metrics of the fine-tuning tasks."""
from bertforge.tasks.metrics.classification import (
    accuracy,
    f1_binary,
    matthews_corrcoef,
    pearson,
    rank_average,
    spearman,
)
from bertforge.tasks.metrics.glue import glue_metrics, mnli_metrics
from bertforge.tasks.metrics.ner import align_predictions_to_words, ner_metrics
from bertforge.tasks.metrics.squad import (
    best_threshold,
    exact_match,
    normalize_answer,
    squad_v1_evaluate,
    squad_v2_evaluate,
    token_f1,
)

__all__ = [
    "accuracy", "align_predictions_to_words", "best_threshold", "exact_match", "f1_binary",
    "glue_metrics", "matthews_corrcoef", "mnli_metrics", "ner_metrics", "normalize_answer",
    "pearson", "rank_average", "spearman", "squad_v1_evaluate", "squad_v2_evaluate", "token_f1",
]
