"""Training: the trainer loop, losses, learning-rate schedules, optimisers, checkpoints and
distributed runs."""
