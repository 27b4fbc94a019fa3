"""The summarisation task: its spec (``task.py``), training, runner and inputs."""
