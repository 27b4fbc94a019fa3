"""The attention explorer: a local web page (``qkv serve``) and single-file export (``qkv
explore``) showing what every kind of qkv model attends to."""
