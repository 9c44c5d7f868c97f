"""Training: optimizers and schedules, the pre-training loop, checkpoint/resume, metrics and curves."""
