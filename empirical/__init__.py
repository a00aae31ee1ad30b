"""PALSGD and its baselines on torch.distributed: algorithms, models, data, trainer, probe."""
