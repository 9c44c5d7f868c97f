"""BigBird's block-sparse attention (Zaheer et al., 2020), the ITC layout, computed block by block.

The padded batch is cut into blocks of `block_size` tokens (the length rounded up to a whole number of blocks, as
transformers pads it). The first and the last block are global: their queries attend to every key, and every
query attends to their keys. Each other query block i attends to the blocks i-1, i, i+1 (the window), the two
global blocks, and `num_random_blocks` random blocks (one draw per head). So a query block sees at most
5 + r blocks: scores are [block, (5 + r) block] per block, and memory and time grow linearly with the length.

The random blocks are drawn as transformers does in eval mode: there, every random block is block 0 (the first
global block, whose keys then count once more in the softmax for each copy), so a model in eval mode gives
transformers' outputs. When training, they are drawn per head and row of blocks, r distinct blocks outside the
window and the global blocks. Like transformers, a batch whose padded length is at most (5 + 2 r) blocks attends
in full (the pattern would cover nearly everything anyway).

Works on the padded [batch, length] grid (not on attention groups): which tokens are global depends on the
batch's padded length, so the grid is the batch's, as in transformers. The dense path
(`Kernels.banded_attention` off) builds the same pattern as one [length, length] mask for SDPA.
"""
from __future__ import annotations

import logging
import math

import torch
import torch.nn.functional as F

from bertforge.model.packing import BlockPattern, PackedBatch

logger = logging.getLogger(__name__)


def _random_blocks(heads: int, blocks: int, r: int, training: bool, device: torch.device) -> torch.Tensor:
    """[heads, blocks - 2, r]: block 0 everywhere in eval (transformers' eval-mode draw); when training, r distinct
    blocks per row, none of them global or in the row's window."""
    rows = blocks - 2
    if not training:
        return torch.zeros(heads, rows, r, dtype=torch.long, device=device)
    query = torch.arange(1, blocks - 1, device=device)[:, None]                      # query block of each row
    candidate = torch.arange(1, blocks - 1, device=device)[None, :]
    allowed = (candidate - query).abs() > 1                                          # [rows, blocks - 2]
    noise = torch.rand(heads, rows, blocks - 2, device=device).masked_fill_(~allowed, 2.0)
    return noise.argsort(dim=-1)[..., :r] + 1


def block_pattern(batch: PackedBatch, block: int, random_blocks: int, heads: int, training: bool) -> BlockPattern:
    """The pattern of `batch`'s padded grid (`length` rounded up to `block`)."""
    if batch.causal:
        raise ValueError("block-sparse attention is bidirectional; it has no causal form")
    if torch.jit.is_tracing():
        raise ValueError("BigBird's attention lays its blocks out from each batch's length in Python, which a trace "
                         "would freeze to the example batch: it has no ONNX export; serve the folder with the "
                         "PyTorch backend")
    B, L = batch.batch_size, batch.seq_len
    length = -(-L // block) * block
    keys = torch.zeros(B, length, dtype=torch.bool, device=batch.device)
    keys[:, :L] = _real(batch)
    keys[~keys.any(dim=1), 0] = True  # a row with no real token: let its queries see one key (never read)
    if L <= (5 + 2 * random_blocks) * block:
        _say_full_attention(L, block, random_blocks)
        return BlockPattern(block, length, keys, True, None, None)
    blocks = length // block
    i = torch.arange(1, blocks - 1, device=batch.device)[:, None]
    window = torch.cat([torch.zeros_like(i), i - 1, i, i + 1, torch.full_like(i, blocks - 1)], dim=1)
    valid = torch.ones(blocks - 2, 5 + random_blocks, dtype=torch.bool, device=batch.device)
    valid[0, 1] = False            # block 1's left neighbour is the first global block
    valid[-1, 3] = False           # block -2's right neighbour is the last global block
    table = torch.cat([window.expand(heads, -1, -1),
                       _random_blocks(heads, blocks, random_blocks, training, batch.device)], dim=-1)
    return BlockPattern(block, length, keys, False, table, valid)


_SAID: set[tuple[int, int]] = set()


def _say_full_attention(length: int, block: int, random_blocks: int) -> None:
    """Once per (block size, random blocks) and process: a batch too short for the block layout attends in full
    (as transformers changes it to `original_full`), which is said rather than done silently."""
    if (block, random_blocks) in _SAID:
        return
    _SAID.add((block, random_blocks))
    limit = (5 + 2 * random_blocks) * block
    logger.warning(f"BigBird: a batch of {length:,} tokens is at most {limit:,} (5 + 2 x {random_blocks} random "
                   f"blocks of {block}): it attends in full, as transformers does; block-sparse attention starts "
                   f"above {limit:,} tokens")


def _real(batch: PackedBatch) -> torch.Tensor:
    """[batch, seq] bool: the real tokens."""
    B, L = batch.batch_size, batch.seq_len
    if batch.indices is not None:
        real = torch.zeros(B * L, dtype=torch.bool, device=batch.device)
        return real.index_fill_(0, batch.indices, True).view(B, L)
    mask = batch.groups[0].mask
    return torch.ones(B, L, dtype=torch.bool, device=batch.device) if mask is None else mask.reshape(B, L)


def to_grid(rows: torch.Tensor, batch: PackedBatch, length: int) -> torch.Tensor:
    """Packed rows [tokens, ...] -> [batch, length, ...] (zeros at padding), differentiably."""
    B, L = batch.batch_size, batch.seq_len
    flat = batch.indices if batch.indices is not None else torch.arange(B * L, device=rows.device)
    slots = flat // L * length + flat % L
    grid = rows.new_zeros(B * length, *rows.shape[1:])
    return grid.index_copy(0, slots, rows).view(B, length, *rows.shape[1:])


def from_grid(grid: torch.Tensor, batch: PackedBatch) -> torch.Tensor:
    """[batch, length, ...] -> the packed rows [tokens, ...]."""
    B, L = batch.batch_size, batch.seq_len
    flat = batch.indices if batch.indices is not None else torch.arange(B * L, device=grid.device)
    length = grid.shape[1]
    return grid.reshape(B * length, *grid.shape[2:]).index_select(0, flat // L * length + flat % L)


def dense_block_mask(pattern: BlockPattern) -> torch.Tensor:
    """The pattern as one [batch, heads, length, length] additive mask (0 or the lowest float): each copy of a
    repeated key block adds log(copies) to its scores, which is what counting it again in the softmax does."""
    B, length = pattern.keys.shape
    blocks = length // pattern.block
    heads = pattern.table.shape[0]
    copies = torch.zeros(heads, blocks, blocks, dtype=torch.float64)
    copies[:, [0, -1], :] = 1.0
    rows = torch.arange(1, blocks - 1)[None, :, None].expand_as(pattern.table)
    head = torch.arange(heads)[:, None, None].expand_as(pattern.table)
    weight = pattern.valid[None].expand_as(pattern.table).double().cpu()
    copies.index_put_((head.reshape(-1), rows.reshape(-1), pattern.table.reshape(-1).cpu()), weight.reshape(-1),
                      accumulate=True)
    copies = copies.to(pattern.keys.device).repeat_interleave(pattern.block, 1).repeat_interleave(pattern.block, 2)
    allowed = (copies[None] > 0) & pattern.keys[:, None, None, :]
    low = torch.finfo(torch.float32).min
    return torch.where(allowed, copies[None].clamp(min=1).log(), torch.full_like(copies[None], low))  # float64


def block_sparse_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pattern: BlockPattern,
                           p: float = 0.0) -> torch.Tensor:
    """q, k, v: [heads, batch, length, d] on the pattern's grid -> [heads, batch, length, d]."""
    h, B, length, d = q.shape
    b = pattern.block
    keys = pattern.keys
    if pattern.full:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keys[None, :, None, :], dropout_p=p)
    nb = length // b
    q = q * (1.0 / math.sqrt(d))
    low = torch.finfo(q.dtype).min
    ends = q.view(h, B, nb, b, d)[:, :, [0, -1]]                                            # the global query blocks
    scores = torch.matmul(ends, k[:, :, None].transpose(-1, -2)).masked_fill_(~keys[None, :, None, None, :], low)
    global_out = torch.matmul(_softmax(scores, p), v[:, :, None])                            # [h, B, 2, b, d]
    table = pattern.table                                                                    # [h, nb - 2, 5 + r]
    head = torch.arange(h, device=q.device)[:, None, None]

    def gathered(t: torch.Tensor) -> torch.Tensor:  # [h, B, length, d] -> [h, B, nb - 2, (5 + r) b, d]
        blocked = t.reshape(h, B, nb, b, -1).transpose(1, 2)[head, table]                   # [h, nb-2, 5+r, B, b, d]
        return blocked.permute(0, 3, 1, 2, 4, 5).reshape(h, B, nb - 2, -1, t.shape[-1])

    key_ok = keys.view(B, nb, b)[:, table]                                                   # [B, h, nb-2, 5+r, b]
    key_ok = (key_ok & pattern.valid[None, None, :, :, None]).permute(1, 0, 2, 3, 4).reshape(h, B, nb - 2, 1, -1)
    middle = q.view(h, B, nb, b, d)[:, :, 1:-1]
    scores = torch.matmul(middle, gathered(k).transpose(-1, -2)).masked_fill_(~key_ok, low)
    middle_out = torch.matmul(_softmax(scores, p), gathered(v))                              # [h, B, nb - 2, b, d]
    out = torch.cat([global_out[:, :, :1], middle_out, global_out[:, :, 1:]], dim=2)
    return out.reshape(h, B, length, d)


def _softmax(scores: torch.Tensor, p: float) -> torch.Tensor:
    wide = torch.promote_types(scores.dtype, torch.float32)
    return F.dropout(torch.softmax(scores, dim=-1, dtype=wide).to(scores.dtype), p, training=p > 0)


def dense_block_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pattern: BlockPattern,
                          p: float = 0.0) -> torch.Tensor:
    """The reference: the same attention under the dense mask of the pattern."""
    if pattern.full:
        return block_sparse_attention(q, k, v, pattern, p)
    mask = dense_block_mask(pattern).permute(1, 0, 2, 3).to(q.dtype)                          # [h, B, L, L]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
