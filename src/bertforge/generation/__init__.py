"""Text generation and scoring with masked language models.

Infilling and unconditional generation by Mask-Predict, Gibbs sampling and Metropolis-Hastings over the
MLM's energy; pseudo-log-likelihood scoring; and conditional generation with an encoder-decoder trained as a
conditional MLM (`generate_conditional`, Mask-Predict's own setting). Works against the masked-LM role and
the tokenizer's mask token, so every family with an MLM head can be used.
"""
from bertforge.generation.api import generate
from bertforge.generation.conditional import generate_conditional
from bertforge.generation.loading import MissingMLMHeadError, load_mlm
from bertforge.generation.samplers import SAMPLERS
from bertforge.generation.scoring import pseudo_log_likelihood
from bertforge.generation.template import GenerationInputError

__all__ = [
           "SAMPLERS",
           "GenerationInputError",
           "MissingMLMHeadError",
           "generate",
           "generate_conditional",
           "load_mlm",
           "pseudo_log_likelihood",
]
