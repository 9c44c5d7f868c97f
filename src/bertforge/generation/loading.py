"""Load a masked LM for generation and scoring, refusing one whose MLM head was never trained.

A sentence-embedding checkpoint (e.g. all-MiniLM-L6-v2) ships the encoder without `cls.predictions.*`;
loading it as a masked LM silently gives a random head whose samples are noise. Generation needs the
head, so a folder without it is an error, not a warning.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from bertforge.checkpoint import CheckpointError, newly_initialized, quiet_loading


class MissingMLMHeadError(CheckpointError):
    """The checkpoint has no trained masked-LM head."""


def load_mlm(path: str | Path, device: str = "cpu") -> tuple[Any, Any]:
    """(model, tokenizer) of a checkpoint folder with a trained MLM head, in eval mode on `device`.

    Works for every family `AutoModelForMaskedLM` knows (BERT, RoBERTa, ALBERT, DistilBERT, ELECTRA's
    generator, ModernBERT); the mask token
    comes from the folder's tokenizer, never from BERT's ids.
    """
    from bertforge.checkpoint import resolve_folder
    from bertforge.device import placement
    from bertforge.model.auto import AutoModelForMaskedLM
    from bertforge.tasks.predictor import is_predictor_folder
    from bertforge.tokenization.auto import load_tokenizer

    folder = resolve_folder(path)
    with quiet_loading():  # the missing head is reported below as an error instead
        model = AutoModelForMaskedLM.from_pretrained(folder)
    head_missing = [name for name in newly_initialized(model) if "pooler" not in name]
    if head_missing and is_predictor_folder(folder):
        raise MissingMLMHeadError(
            f"{folder} is a fine-tuned predictor (it has task.json): its head predicts the task's labels, not "
            "masked tokens -- `bertforge predict` runs it; this command needs a folder with a trained masked-LM "
            "head, such as `bertforge pretrain`'s output")
    if head_missing:
        raise MissingMLMHeadError(
            f"{folder} has no trained masked-LM head ({head_missing[0]} is not in the checkpoint): its "
            f"predictions would come from a random head -- continue pre-training with `bertforge pretrain "
            f"--init-from {folder} --objective mlm` first")
    tokenizer = load_tokenizer(folder)
    if getattr(tokenizer, "mask_token", None) is None or tokenizer.mask_token_id is None:
        raise MissingMLMHeadError(f"{folder}: the tokenizer has no mask token")
    return model.to(placement(device, None)[0]).eval(), tokenizer


def is_encoder_decoder(path: str | Path) -> bool:
    from bertforge.checkpoint import resolve_folder
    from bertforge.model.auto import read_model_type
    from bertforge.model.encoder_decoder import MODEL_TYPE
    return read_model_type(resolve_folder(path)) == MODEL_TYPE


def load_encoder_decoder(path: str | Path, device: str = "cpu") -> tuple[Any, Any]:
    """(model, tokenizer) of an encoder-decoder folder (`bertforge seq2seq`'s output), in eval mode on `device`;
    refused when the decoder's weights are incomplete (a warm start that was never trained)."""
    from bertforge.checkpoint import resolve_folder
    from bertforge.device import placement
    from bertforge.model.encoder_decoder import EncoderDecoderModel
    from bertforge.tokenization.auto import load_tokenizer

    folder = resolve_folder(path)
    with quiet_loading():  # missing decoder weights are reported below as an error instead
        model = EncoderDecoderModel.from_pretrained(folder)
    missing = newly_initialized(model.decoder)
    if missing:
        raise MissingMLMHeadError(f"{folder}: the decoder's {missing[0]} is not in the checkpoint; train the "
                                  "encoder-decoder with `bertforge seq2seq` first")
    tokenizer = load_tokenizer(folder)
    if getattr(tokenizer, "mask_token", None) is None or tokenizer.mask_token_id is None:
        raise MissingMLMHeadError(f"{folder}: the tokenizer has no mask token")
    return model.to(placement(device, None)[0]).eval(), tokenizer
