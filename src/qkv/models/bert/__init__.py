"""The BERT-family encoder (Devlin et al. 2019) in Hugging Face's ``BertModel`` layout: the
module path (:mod:`~qkv.models.bert.model`) and its inference path over unpadded tokens
(:mod:`~qkv.models.bert.fast`)."""

from qkv.models.bert.model import BertConfig, BertEncoder

__all__ = ["BertConfig", "BertEncoder"]
