"""The language_model task: its spec (``task.py``), training, runner and inputs."""
