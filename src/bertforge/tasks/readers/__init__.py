"""Readers for the fine-tuning data sets, in their real published formats."""
from bertforge.tasks.readers.base import MAX_SKIP_SAMPLES, ReadResult
from bertforge.tasks.readers.conll import CONLL2003_LABELS, NerSentence, ner_label_list, read_conll
from bertforge.tasks.readers.errors import BadRowsError, DataError
from bertforge.tasks.readers.examples import TextExample
from bertforge.tasks.readers.generic import infer_label_list, numeric_labels, read_classification
from bertforge.tasks.readers.glue import GLUE_FORMATS, glue_labels, normalize_task_name, read_glue
from bertforge.tasks.readers.squad import (
    SquadAnswer,
    SquadExample,
    SquadReadResult,
    load_squad_json,
    locate_answer,
    read_squad,
    split_squad_by_article,
)
from bertforge.tasks.readers.ner import read_ner
from bertforge.tasks.readers.qa import read_qa
from bertforge.tasks.readers.swag import SwagExample, read_swag

__all__ = [
    "BadRowsError", "CONLL2003_LABELS", "DataError", "GLUE_FORMATS", "MAX_SKIP_SAMPLES", "NerSentence", "ReadResult",
    "SquadAnswer", "SquadExample", "SquadReadResult", "SwagExample", "TextExample", "glue_labels",
    "infer_label_list", "load_squad_json", "locate_answer", "ner_label_list", "normalize_task_name",
    "numeric_labels", "read_classification", "read_conll", "read_glue", "read_ner", "read_qa", "read_squad",
    "read_swag", "split_squad_by_article",
]
