"""bertforge: BERT end to end — WordPiece vocabulary, pre-training, fine-tuning, evaluation — fast, exact,
and checkpoint-compatible with Hugging Face `transformers`."""
from bertforge.checkpoint import CheckpointError
from bertforge.config import BertConfig
from bertforge.model import BertForMaskedLM, BertForPreTraining, BertModel
from bertforge.model import (BertForMultipleChoice, BertForQuestionAnswering, BertForSequenceClassification,
                             BertForTokenClassification)

__version__ = "0.1.0"

__all__ = ["BertConfig", "BertModel", "BertForMaskedLM", "BertForPreTraining", "CheckpointError", "__version__",
           "BertForSequenceClassification", "BertForTokenClassification", "BertForQuestionAnswering",
           "BertForMultipleChoice"]


def __getattr__(name: str):
    # The tokenizer is imported lazily so `import bertforge` stays light for model-only use.
    if name == "BertTokenizer":
        from bertforge.tokenization import BertTokenizer
        return BertTokenizer
    raise AttributeError(f"module 'bertforge' has no attribute {name!r}")
