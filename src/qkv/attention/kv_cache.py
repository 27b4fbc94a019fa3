"""Key/value cache for incremental (token-by-token) decoding.

A decoder that has already attended over positions ``0 .. S-1`` keeps their projected keys and
values here, so the next step projects only its new positions. The cache is an explicit value the
caller creates, passes to every call and keeps: no module stores it (no hidden state).

Two kinds:

* a **growing** cache (:meth:`KVCache.empty`): each :meth:`KVCache.update` appends new keys and
  values; with ``max_len`` the storage is allocated once and written in place, otherwise it
  grows by concatenation (which keeps autograd usable);
* a **static** cache (:meth:`KVCache.static`): keys and values computed once, for example the
  projected encoder states of cross-attention; :meth:`KVCache.update` refuses to change it.
"""

from __future__ import annotations

import torch
from torch import Tensor


class KVCache:
    """Cached keys ``(B, Hkv, S, Dh)`` and values ``(B, Hkv, S, Dv)``."""

    def __init__(self, key: Tensor, value: Tensor, length: int, *, static: bool, grows: bool):
        self._key = key
        self._value = value
        self.length = length
        self.is_static = static
        self._grows = grows

    @classmethod
    def empty(
        cls,
        batch: int,
        heads: int,
        key_dim: int,
        value_dim: int | None = None,
        *,
        max_len: int | None = None,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> KVCache:
        """A cache with no positions yet.

        Args:
            batch: ``B``.
            heads: the number of key/value heads ``Hkv``.
            key_dim: the per-head width of the keys.
            value_dim: the per-head width of the values (defaults to ``key_dim``).
            max_len: capacity; storage is allocated once. ``None``: grow by concatenation.
        """
        value_dim = key_dim if value_dim is None else value_dim
        if min(batch, heads, key_dim, value_dim) <= 0:
            raise ValueError(
                f"KVCache needs positive sizes, got batch={batch}, heads={heads}, "
                f"key_dim={key_dim}, value_dim={value_dim}"
            )
        if max_len is not None and max_len <= 0:
            raise ValueError(f"KVCache max_len must be positive, got {max_len}")
        size = 0 if max_len is None else max_len
        key = torch.empty(batch, heads, size, key_dim, dtype=dtype, device=device)
        value = torch.empty(batch, heads, size, value_dim, dtype=dtype, device=device)
        return cls(key, value, 0, static=False, grows=max_len is None)

    @classmethod
    def static(cls, key: Tensor, value: Tensor) -> KVCache:
        """A cache holding fixed keys ``(B, Hkv, S, Dh)`` and values ``(B, Hkv, S, Dv)``."""
        if key.dim() != 4 or value.dim() != 4 or key.shape[:3] != value.shape[:3]:
            raise ValueError(
                "static KVCache needs key (B, Hkv, S, Dh) and value (B, Hkv, S, Dv) that agree "
                f"in B, Hkv and S, got {tuple(key.shape)} and {tuple(value.shape)}"
            )
        return cls(key, value, key.size(2), static=True, grows=False)

    @property
    def capacity(self) -> int | None:
        """Most positions the cache can hold, or ``None`` for a growing cache."""
        return None if self._grows else self._key.size(2)

    @property
    def key(self) -> Tensor:
        """``(B, Hkv, S, Dh)`` keys of the ``S = length`` cached positions."""
        return self._key[:, :, : self.length]

    @property
    def value(self) -> Tensor:
        """``(B, Hkv, S, Dv)`` values of the cached positions."""
        return self._value[:, :, : self.length]

    def select(self, index: Tensor) -> KVCache:
        """A new cache holding batch rows ``index (B',)`` (beam search reorders hypotheses so).

        Spare capacity is kept, so the selected cache can keep growing in place.
        """
        return KVCache(
            self._key.index_select(0, index),
            self._value.index_select(0, index),
            self.length,
            static=self.is_static,
            grows=self._grows,
        )

    def update(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Append ``T`` new positions and return all keys and values.

        Args:
            key: ``(B, Hkv, T, Dh)``; value: ``(B, Hkv, T, Dv)``.

        Returns:
            ``(key, value)`` of shapes ``(B, Hkv, S + T, Dh)`` and ``(B, Hkv, S + T, Dv)``.
        """
        if self.is_static:
            raise ValueError(
                "this KVCache is static (fixed keys, e.g. cross-attention); it cannot grow"
            )
        expected = (self._key.size(0), self._key.size(1))
        if key.dim() != 4 or key.shape[:2] != expected or key.size(-1) != self._key.size(-1):
            raise ValueError(
                f"new keys of shape {tuple(key.shape)} do not fit a cache of (B, Hkv, *, Dh) = "
                f"({expected[0]}, {expected[1]}, *, {self._key.size(-1)})"
            )
        if value.shape[:3] != key.shape[:3] or value.size(-1) != self._value.size(-1):
            raise ValueError(
                f"new values of shape {tuple(value.shape)} do not match keys {tuple(key.shape)} "
                f"and value width {self._value.size(-1)}"
            )
        new = key.size(2)
        if self._grows:
            self._key = torch.cat([self.key, key.to(self._key.dtype)], dim=2)
            self._value = torch.cat([self.value, value.to(self._value.dtype)], dim=2)
        else:
            end = self.length + new
            if end > self._key.size(2):
                raise ValueError(
                    f"KVCache overflow: {self.length} cached + {new} new positions exceed "
                    f"max_len={self._key.size(2)}"
                )
            self._key[:, :, self.length : end] = key
            self._value[:, :, self.length : end] = value
        self.length += new
        return self.key, self.value
