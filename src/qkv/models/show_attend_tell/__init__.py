"""Show, Attend and Tell (Xu et al. 2015): the captioner
(:mod:`~qkv.models.show_attend_tell.model`), its region encoder and its soft or hard attention
over the regions."""

from qkv.models.show_attend_tell.model import ShowAttendTell, ShowAttendTellConfig

__all__ = ["ShowAttendTell", "ShowAttendTellConfig"]
