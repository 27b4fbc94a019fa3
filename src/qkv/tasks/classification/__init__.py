"""The classification task: its spec (``task.py``), training, runner and inputs."""
