"""Pretrained pipelines that are not tasks (nothing is trained): sentence embeddings from a
pretrained encoder."""
