"""Text pairs: parallel corpora for translation (the Bible, the reverse task, user files) and their
token-budget batches; summarisation and dialogue pairs (docstrings, ACLSum, the plays' turns,
the copy task) with the pointer-generator's words."""
