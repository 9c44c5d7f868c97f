"""Pre-training data: raw text -> memory-mapped token shards -> BERT/ALBERT/RoBERTa/LTR example batches."""
from bertforge.data.corpus import FORMATS, detect_format
from bertforge.data.dataset import OBJECTIVES, PACKINGS, PretrainingDataset
from bertforge.data.examples import build_plan
from bertforge.data.masking import MaskingConfig, mask_tokens
from bertforge.data.sentences import split_sentences
from bertforge.data.shards import CorpusError, CorpusSplit, load_manifest, prepare_corpus, vocab_sha256

__all__ = [
    "FORMATS", "OBJECTIVES", "PACKINGS", "CorpusError", "CorpusSplit", "MaskingConfig", "PretrainingDataset",
    "build_plan", "detect_format", "load_manifest", "mask_tokens", "prepare_corpus", "split_sentences",
    "vocab_sha256",
]
