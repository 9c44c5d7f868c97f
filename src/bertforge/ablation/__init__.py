"""The papers' ablation tables and the runner behind `bertforge ablate` (equal-budget pre-training per row)."""
