"""A batch of sequences sharing one KV cache, fed ragged chunks and rolled back per row.

Rows of a batch advance by different numbers of tokens (they accept different
numbers of draft tokens), but a `DynamicCache` holds one rectangle. A
`KVStream` keeps the rectangle and a 2-D attention mask beside it:

- `feed` right-aligns each row's chunk, so a shorter chunk leaves masked
  holes on its left (the same as left padding of a prompt);
- position ids count each row's real tokens only, so RoPE sees the same
  positions as an unpadded run of that row alone;
- `drop` forgets each row's last n real tokens: the columns that every row
  drops are cropped off the cache, the rest are masked as holes.

Masked keys get exactly zero attention weight, so every row computes what it
would compute alone (up to the floating-point order of a batched matmul).
Holes cost memory and attention time: a row gets `a_max - a_row` of them per
pass (the best row's accepted count minus its own). Cropping every row to the
batch's shortest accepted length and re-feeding the others' surplus tokens
would also be exact, but it leaves the same number of masked columns (the
re-fed chunks differ in length, so they must be padded) and recomputes the
re-fed tokens; masking in place is the cheaper of the two.
Sliding-window layers count columns, not tokens, so holes would change what a
row sees: `KVStream` refuses such models for batches of more than one row.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

# Holes must hold some token id; they are masked, so any valid id will do.
_HOLE_TOKEN = 0


class KVStream:
    """One model's KV cache over a batch of rows, with per-row real-token counts."""

    def __init__(self, model: torch.nn.Module, batch_size: int, device: torch.device) -> None:
        self.model = model
        self.device = device
        self.cache = DynamicCache(config=model.config)
        if batch_size > 1 and any(type(layer) is not DynamicLayer for layer in self.cache.layers):
            raise ValueError("the batched loop supports full-attention layers only")
        # Sliding layers keep past states only when asked, and crop needs them.
        self.cache.activate_past_recording()
        self.mask = torch.zeros((batch_size, 0), dtype=torch.long, device=device)
        self.lengths = [0] * batch_size  # real tokens cached per row

    @property
    def batch_size(self) -> int:
        return len(self.lengths)

    def feed(self, chunks: list[list[int]], logits_to_keep: int = 1) -> torch.Tensor:
        """Run the model over each row's new tokens; logits of the last columns.

        Row b's chunk occupies the last `len(chunks[b])` columns, so
        `logits[b, -1]` always predicts the token after the row's last one.
        """
        width = max(len(c) for c in chunks)
        ids = torch.full((self.batch_size, width), _HOLE_TOKEN, dtype=torch.long)
        new_mask = torch.zeros((self.batch_size, width), dtype=torch.long)
        positions = torch.zeros((self.batch_size, width), dtype=torch.long)
        for row, chunk in enumerate(chunks):
            if chunk:
                start = width - len(chunk)
                ids[row, start:] = torch.tensor(chunk, dtype=torch.long)
                new_mask[row, start:] = 1
                positions[row, start:] = torch.arange(len(chunk)) + self.lengths[row]
            self.lengths[row] += len(chunk)
        self.mask = torch.cat([self.mask, new_mask.to(self.device)], dim=1)
        out = self.model(
            input_ids=ids.to(self.device),
            attention_mask=self.mask,
            position_ids=positions.to(self.device),
            cache=self.cache,
            use_cache=True,
            logits_to_keep=min(logits_to_keep, width),
        )
        return out.logits

    def drop(self, counts: list[int]) -> None:
        """Forget the last `counts[b]` real tokens of each row b."""
        for row, count in enumerate(counts):
            if count:
                real = self.mask[row].nonzero().flatten()
                self.mask[row, real[-count:]] = 0
                self.lengths[row] -= count
        trailing = _trailing_empty_columns(self.mask)
        if trailing:
            self.cache.crop(-trailing)
            self.mask = self.mask[:, : self.mask.shape[1] - trailing]

    def select(self, rows: list[int]) -> None:
        """Keep only these rows (finished sequences leave the batch)."""
        index = torch.tensor(rows, dtype=torch.long, device=self.device)
        self.cache.batch_select_indices(index)
        self.mask = self.mask[index]
        self.lengths = [self.lengths[r] for r in rows]


def _trailing_empty_columns(mask: torch.Tensor) -> int:
    used = mask.any(dim=0).nonzero()
    return mask.shape[1] if used.numel() == 0 else mask.shape[1] - 1 - int(used[-1])
