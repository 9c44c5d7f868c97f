"""Fine-tuning tasks: data readers, official metrics and the task registry."""
from bertforge.tasks.metrics import (
    accuracy,
    align_predictions_to_words,
    best_threshold,
    exact_match,
    f1_binary,
    glue_metrics,
    matthews_corrcoef,
    mnli_metrics,
    ner_metrics,
    normalize_answer,
    pearson,
    rank_average,
    spearman,
    squad_v1_evaluate,
    squad_v2_evaluate,
    token_f1,
)
from bertforge.tasks.readers import (
    CONLL2003_LABELS,
    GLUE_FORMATS,
    MAX_SKIP_SAMPLES,
    DataError,
    NerSentence,
    ReadResult,
    SquadAnswer,
    SquadExample,
    SquadReadResult,
    SwagExample,
    TextExample,
    glue_labels,
    infer_label_list,
    load_squad_json,
    normalize_task_name,
    read_classification,
    read_conll,
    read_glue,
    read_squad,
    read_swag,
    split_squad_by_article,
)
from bertforge.tasks.glue_tasks import GLUE, GlueTask, glue_task
from bertforge.tasks.registry import TASKS, HeadKind, TaskSpec, get_task

__all__ = [
    "CONLL2003_LABELS", "DataError", "GLUE", "GLUE_FORMATS", "GlueTask", "HeadKind", "MAX_SKIP_SAMPLES", "NerSentence",
    "ReadResult", "SquadAnswer", "SquadExample", "SquadReadResult", "SwagExample", "TASKS", "TaskSpec",
    "TextExample", "accuracy", "align_predictions_to_words", "best_threshold", "exact_match", "f1_binary",
    "get_task", "glue_labels", "glue_task", "glue_metrics", "infer_label_list", "load_squad_json", "matthews_corrcoef",
    "mnli_metrics", "ner_metrics", "normalize_answer", "normalize_task_name", "pearson", "rank_average",
    "read_classification", "read_conll", "read_glue", "read_squad", "read_swag", "spearman",
    "split_squad_by_article", "squad_v1_evaluate", "squad_v2_evaluate", "token_f1",
]
