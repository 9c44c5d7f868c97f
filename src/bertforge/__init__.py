"""bertforge: BERT end to end — WordPiece vocabulary, pre-training, fine-tuning, evaluation — fast, exact,
and checkpoint-compatible with Hugging Face `transformers`."""
from bertforge.checkpoint import CheckpointError
from bertforge.config import BertConfig
from bertforge.model import BertForMaskedLM, BertForPreTraining, BertModel
from bertforge.model import (BertForMultipleChoice, BertForQuestionAnswering, BertForSequenceClassification,
                             BertForTokenClassification)
from bertforge.version import __version__

# Imported on first use, so `import bertforge` stays light for model-only use.
_LAZY = {
    "BertTokenizer": "bertforge.tokenization",
    "load_tokenizer": "bertforge.tokenization",
    "Predictor": "bertforge.tasks.predictor",
    **{name: "bertforge.tasks.lr_find" for name in ("lr_find", "LrFindSettings", "LrFindResult")},
    **{name: "bertforge.model.auto" for name in (
        "AutoConfig", "AutoModel", "AutoModelForMaskedLM", "AutoModelForPreTraining",
        "AutoModelForSequenceClassification", "AutoModelForTokenClassification", "AutoModelForQuestionAnswering",
        "AutoModelForMultipleChoice")},
    **{name: "bertforge.model.roberta" for name in (
        "RobertaConfig", "RobertaModel", "RobertaForMaskedLM", "RobertaForSequenceClassification",
        "RobertaForTokenClassification", "RobertaForQuestionAnswering", "RobertaForMultipleChoice")},
    **{name: "bertforge.model.albert" for name in (
        "AlbertConfig", "AlbertModel", "AlbertForMaskedLM", "AlbertForPreTraining", "AlbertForSequenceClassification",
        "AlbertForTokenClassification", "AlbertForQuestionAnswering", "AlbertForMultipleChoice")},
    **{name: "bertforge.model.distilbert" for name in (
        "DistilBertConfig", "DistilBertModel", "DistilBertForMaskedLM", "DistilBertForSequenceClassification",
        "DistilBertForTokenClassification", "DistilBertForQuestionAnswering", "DistilBertForMultipleChoice")},
    **{name: "bertforge.model.electra" for name in (
        "ElectraConfig", "ElectraModel", "ElectraForPreTraining", "ElectraForMaskedLM",
        "ElectraForSequenceClassification", "ElectraForTokenClassification", "ElectraForQuestionAnswering",
        "ElectraForMultipleChoice")},
    **{name: "bertforge.model.modernbert" for name in (
        "ModernBertConfig", "ModernBertModel", "ModernBertForMaskedLM", "ModernBertForSequenceClassification",
        "ModernBertForTokenClassification", "ModernBertForQuestionAnswering", "ModernBertForMultipleChoice")},
    **{name: "bertforge.model.longformer" for name in (
        "LongformerConfig", "LongformerModel", "LongformerForMaskedLM", "LongformerForSequenceClassification",
        "LongformerForTokenClassification", "LongformerForQuestionAnswering", "LongformerForMultipleChoice")},
    **{name: "bertforge.model.big_bird" for name in (
        "BigBirdConfig", "BigBirdModel", "BigBirdForMaskedLM", "BigBirdForSequenceClassification",
        "BigBirdForTokenClassification", "BigBirdForQuestionAnswering", "BigBirdForMultipleChoice")},
    **{name: "bertforge.model.xlnet" for name in (
        "XLNetConfig", "XLNetModel", "XLNetLMHeadModel", "XLNetForSequenceClassification",
        "XLNetForTokenClassification", "XLNetForQuestionAnsweringSimple", "XLNetForMultipleChoice")},
    **{name: "bertforge.model.encoder_decoder" for name in (
        "EncoderDecoderConfig", "EncoderDecoderModel", "BertLMHeadModel")},
    "Kernels": "bertforge.model.kernels",
    # the result files as types (to_json/from_json): training_summary.json, metrics.json, glue.json, distill_summary.json
    "TrainingSummary": "bertforge.training.summary",
    "FinetuneReport": "bertforge.tasks.finetune_report",
    "GlueResult": "bertforge.evaluation.glue_result",
    "DistillReport": "bertforge.pretraining.distill",
    "SentenceEncoder": "bertforge.serving.embeddings",
    "generate": "bertforge.generation",
    "pseudo_log_likelihood": "bertforge.generation",
    "generate_conditional": "bertforge.generation",
    "RobertaTokenizer": "bertforge.tokenization.bpe",
    "AlbertTokenizer": "bertforge.tokenization.sentencepiece",
    "XLNetTokenizer": "bertforge.tokenization.xlnet",
}

__all__ = ["BertConfig", "BertModel", "BertForMaskedLM", "BertForPreTraining", "CheckpointError", "__version__",
           "BertForSequenceClassification", "BertForTokenClassification", "BertForQuestionAnswering",
           "BertForMultipleChoice", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'bertforge' has no attribute {name!r}")
