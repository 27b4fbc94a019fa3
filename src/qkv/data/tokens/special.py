"""Special tokens shared by every vocabulary (see ``docs/design/seq2seq-interfaces.md``).

Every tokenizer in qkv puts these four tokens at ids 0-3, in this order, so models, decoding and
losses can use the constants below without asking the tokenizer.
"""

from __future__ import annotations

PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, UNK_TOKEN = "<pad>", "<s>", "</s>", "<unk>"
SPECIAL_TOKENS = [PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, UNK_TOKEN]
