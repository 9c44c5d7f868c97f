"""Experiments that combine the stages: the papers' ablation tables (`bertforge ablate`)."""
