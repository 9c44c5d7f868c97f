"""The BERT encoder, composed of small named parts, and its pre-training heads."""
from bertforge.model.bert import BertForMaskedLM, BertForPreTraining, BertModel, BertPreTrainedModel
from bertforge.model.flops import count_flops
from bertforge.model.outputs import BertForPreTrainingOutput, BertModelOutput, MaskedLMOutput

__all__ = ["BertModel", "BertForMaskedLM", "BertForPreTraining", "BertPreTrainedModel", "BertModelOutput",
           "MaskedLMOutput", "BertForPreTrainingOutput", "count_flops"]
