"""The ner task: its spec (``task.py``), training, runner and inputs."""
