"""Corpus pre-training stages for the engine: MLM/NSP/SOP/ELECTRA pre-training with its recipes
(`pretrain`, `recipes`) and DistilBERT's distillation on a corpus (`distill`)."""
