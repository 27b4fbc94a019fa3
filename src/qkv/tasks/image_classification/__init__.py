"""The image_classification task: its spec (``task.py``), training, runner and inputs."""
