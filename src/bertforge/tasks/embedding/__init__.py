"""Sentence embeddings as a product: pooling and the sentence-transformers folder, pair data, contrastive and
scored-pair losses, the training stage, and STS / retrieval evaluation."""
