"""Pre-training data: raw text and record files -> memory-mapped token shards -> BERT/ALBERT/RoBERTa/LTR batches."""
from bertforge.data.corpus import FORMATS, detect_format
from bertforge.data.dataset import OBJECTIVES, PACKINGS, PretrainingDataset
from bertforge.data.examples import build_plan
from bertforge.data.masking import MaskingConfig, mask_tokens
from bertforge.data.prepare import prepare_corpus
from bertforge.data.records import RecordError
from bertforge.data.sentences import split_sentences
from bertforge.data.shards import CorpusError, CorpusSplit, load_manifest, vocab_sha256

__all__ = [
    "FORMATS", "OBJECTIVES", "PACKINGS", "CorpusError", "CorpusSplit", "MaskingConfig", "PretrainingDataset",
    "RecordError", "build_plan", "detect_format", "load_manifest", "mask_tokens", "prepare_corpus",
    "split_sentences", "vocab_sha256",
]
