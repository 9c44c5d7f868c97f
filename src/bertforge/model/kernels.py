"""Which implementation each speed-sensitive part of the model uses: one options object for the whole model.

The reference path is plain PyTorch: padded batches, one attention grid, `F.dropout`, `F.linear`. The fast path
(the default) adds, each behind one switch here: unpadding and attention groups (`packing.py`, with the
hand-written scatter/gather backward in `attention.py`), cheaper CPU dropout masks (`dropout.py`), explicit
attention when training with attention dropout or in bf16 on CPU (`attention.py`), the tiled vocabulary decoder
(`tiled_linear.py`), a last layer that computes only the rows the heads read (`encoder.py`), and the sparse
attention of long-input models computed band by band or block by block (Longformer's `sliding_window.py`, BigBird's
`block_sparse.py`; the reference builds the pattern's dense mask). Both paths
compute the same function (tests hold them equal to 1e-5); a model switches with
`model.set_kernels(Kernels.reference())`, never by rewriting module globals.

`Kernels.export()` is the reference path in the padded `[batch, seq, hidden]` layout with attention spelled out
(separate Q/K/V projections, scores / sqrt(d) + an additive mask, softmax): what an ONNX trace records for any
batch shape, in the shapes ONNX Runtime's transformer optimizer fuses into its Attention, SkipLayerNormalization
and EmbedLayerNormalization kernels.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class Kernels:
    unpad: bool = True                       # layers see real tokens only; attention in groups of similar length
    attention_groups: int = 4                # at most this many attention grids per batch (1: one padded grid)
    cheap_dropout: bool = True               # CPU dropout masks from 16-bit lanes of one 64-bit draw
    explicit_attention_dropout: bool = True  # CPU training with attention dropout: baddbmm + softmax + bmm
    explicit_attention_bf16: bool = True     # CPU training in bf16: the same explicit path instead of SDPA
    tiled_decoder: bool = True               # CPU fp32 vocabulary decoder in cache-sized output tiles
    read_rows_only: bool = True              # the last layer runs on the rows the heads read, not on every token
    grid_layout: bool = False                # padded [batch, seq, hidden] through the stack, attention spelled out
    banded_attention: bool = True            # Longformer/BigBird patterns chunk by chunk, not as a [seq, seq] mask
    dense_short_windows: bool = True         # ... except a Longformer grid within three radii: its [seq, seq] mask

    @classmethod
    def fast(cls) -> "Kernels":
        return cls()

    @classmethod
    def reference(cls) -> "Kernels":
        """Plain PyTorch everywhere: what the fast path is checked against."""
        return cls(unpad=False, attention_groups=1, cheap_dropout=False, explicit_attention_dropout=False,
                   explicit_attention_bf16=False, tiled_decoder=False, read_rows_only=False,
                   banded_attention=False)

    @classmethod
    def export(cls) -> "Kernels":
        """The reference path in the layout an ONNX export should record (see the module docstring); models whose
        attention takes positions or masks of its own (rotary, relative bias, local or causal attention,
        cross-attention) keep the flat reference layout."""
        return dataclasses.replace(cls.reference(), grid_layout=True)


FAST = Kernels.fast()
