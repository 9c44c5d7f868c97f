"""The BERT encoder, composed of small named parts, and its pre-training heads."""
from bertforge.model.bert import BertForMaskedLM, BertForPreTraining, BertModel, BertPreTrainedModel
from bertforge.model.flops import count_flops
from bertforge.model.outputs import BertForPreTrainingOutput, BertModelOutput, MaskedLMOutput
from bertforge.model.task_heads import (BertForMultipleChoice, BertForQuestionAnswering, BertForSequenceClassification,
                                       BertForTokenClassification)

__all__ = ["BertModel", "BertForMaskedLM", "BertForPreTraining", "BertPreTrainedModel", "BertModelOutput",
           "MaskedLMOutput", "BertForPreTrainingOutput", "count_flops", "BertForSequenceClassification",
           "BertForTokenClassification", "BertForQuestionAnswering", "BertForMultipleChoice"]
