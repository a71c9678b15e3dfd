"""A sequence of any length: the biLM run a window of steps at a time, its LSTM states carried exactly.

An LSTM is a recurrence: the state after step t depends only on the state after step t - 1 and the input at t. So
a long row runs in windows of steps, each starting from the state the last one ended in: the forward stack over
positions 0, 1, ... and the backward stack over the row reversed (from its last token back to its first), window
after window in each direction's own order. Layer 0, the token layer, is per token. Every window writes its
positions of the ELMo layers into one output tensor, so besides the output the memory is one window's activations
(not several copies of a row's layers), and the caller gets control between windows (to stop) however long the
row is.

The same bits as one call over the whole batch (:meth:`BiLM.contextualize`), in float32 on the CPU, because each
window does the same arithmetic: step t of either direction multiplies the same rows in the same GEMMs (the
backward windows are cut in reversed positions, where rows start together, as in the whole call), and the input
half of the gates is computed in the same row groups or in pieces of them of at least :data:`MIN_WINDOW` steps
(MKL's GEMM gives a row the same bits whatever the row count from a dozen rows up; below, it takes other kernels or
splits the rows between threads otherwise, so no piece is that small unless the whole call's group is).
``tests/modules/test_long_sequences.py`` holds the two equal.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch

from elmo.config import MIN_WINDOW
from elmo.modules.bilm import BiLM, BiLMState
from elmo.modules.lstm import LstmStack, LstmState, step_windows
from elmo.runtime.side_by_side import side_by_side

TokenLookup = Callable[[torch.Tensor], torch.Tensor]
"""``tokens(positions)``: the token-layer vectors at ``positions`` (B, w) of each row, (B, w, P); looked up per
window, so the (B, T, P) token tensor of a long row is never built. Positions past a row's end are masked after."""


def windows(lengths: torch.Tensor, window: int, group_rows: int) -> list[tuple[int, int]]:
    """``[start, stop)`` of the windows of at most ``window`` steps (at least :data:`MIN_WINDOW`, except a whole
    group) over rows of ``lengths`` (B,): pieces of the step groups that one call over the whole batch computes the
    input GEMM in (:func:`~elmo.modules.lstm.step_windows` with ``group_rows`` rows at most), never across two."""
    window = max(window, MIN_WINDOW)
    steps = int(lengths.max()) if lengths.numel() else 0
    running = (lengths.unsqueeze(0) > torch.arange(steps, device=lengths.device).unsqueeze(1)).sum(dim=1)  # (T,)
    spans = []
    for start, stop, _ in step_windows(running.tolist(), group_rows):
        cuts = list(range(start, stop, window))
        if len(cuts) > 1 and stop - cuts[-1] < MIN_WINDOW:
            cuts.pop()  # a short last piece joins the one before
        spans += zip(cuts, [*cuts[1:], stop])
    return spans


def contextualize_in_windows(
    bilm: BiLM, tokens: TokenLookup, mask: torch.Tensor, out: torch.Tensor, state: BiLMState | None = None, *,
    window: int, between_windows: Callable[[], None] | None = None, offset: int = 0,
) -> BiLMState:
    """What :meth:`BiLM.contextualize` computes, a window of steps at a time, written into ``out``.

    Args:
        tokens: the token-layer vectors by position (:data:`TokenLookup`); mask: (B, T) bool, padding at the end of
            rows.
        out: (B, L + 1, T', 2P), filled with the layers :meth:`BiLM.contextualize` returns (token layer first, zero
            at padding) at positions ``offset`` .. ``offset + T' - 1``, converted to its dtype and device; the other
            positions are computed, not kept (a caller that drops ``<S>``: ``offset=1``, ``T' = T - 2``, so that a
            row's vectors are one contiguous block).
        state: where each row starts (None: zeros), as for :meth:`BiLM.contextualize`.
        window: steps per window (:func:`windows`).
        between_windows: called after each window (a caller's stop check).

    Returns:
        The final state, as :meth:`BiLM.contextualize` returns it.
    """
    batch, time = mask.shape
    width = out.shape[-1] // 2  # P
    kept = out.shape[2]  # T'
    lengths = mask.sum(dim=1)  # (B,)
    weight = bilm.forward_lstm.layers[0].state_linearity.weight
    h, c = state if state is not None else bilm.zero_state(batch)
    # the memory cells stay float32 from window to window, as they do from step to step inside one call
    carried = [(h[d], c[d].float()) for d in range(2)]  # per direction: h (L, B, P), c (L, B, C)
    group_rows = bilm.forward_lstm.layers[0].input_window_rows()
    for start, stop in windows(lengths, window, group_rows):
        (x, forward_layers, carried[0]), (backward, carried[1]) = side_by_side(  # on two cores when allowed
            partial(_forward_window, bilm.forward_lstm, tokens, mask, start, stop, carried[0]),
            partial(_backward_window, bilm.backward_lstm, tokens, mask, lengths, start, stop, carried[1]),
        )
        low, high = max(start, offset), min(stop, offset + kept)  # the forward window's positions that are kept
        rows, positions, backward_layers = backward
        inside = (positions >= offset) & (positions < offset + kept)  # (N,) the backward steps' positions kept
        rows, at = rows[inside].to(out.device), (positions[inside] - offset).to(out.device)
        if low < high:
            out[:, 0, low - offset : high - offset] = torch.cat([x, x], dim=-1)[:, low - start : high - start]
        for layer, (f, b) in enumerate(zip(forward_layers, backward_layers, strict=True), start=1):
            if low < high:
                out[:, layer, low - offset : high - offset, :width] = f[:, low - start : high - start]
            out[rows, layer, at, width:] = b[inside].to(out.device, out.dtype)
        if between_windows is not None:
            between_windows()
    for row, length in enumerate(lengths.tolist()):
        out[row, 1:, max(length - offset, 0) :, width:] = 0  # padding, which no backward window reaches
    out[:, :, max(int(lengths.max()) - offset, 0) :] = 0  # columns past the longest row, if the mask has any
    h_dtype, c_dtype = (h.dtype, c.dtype) if state is not None else (weight.dtype, weight.dtype)
    return (torch.stack([carried[0][0], carried[1][0]]).to(h_dtype),
            torch.stack([carried[0][1], carried[1][1]]).to(c_dtype))


def _masked(tokens: TokenLookup, positions: torch.Tensor, window_mask: torch.Tensor) -> torch.Tensor:
    """The token vectors at ``positions`` (B, w), zeroed where the window mask is False (as
    :meth:`BiLM.contextualize` zeroes padding)."""
    x = tokens(positions)  # (B, w, P)
    return x * window_mask.unsqueeze(-1).to(x.dtype)


def _forward_window(stack: LstmStack, tokens: TokenLookup, mask: torch.Tensor, start: int, stop: int,
                    state: LstmState) -> tuple[torch.Tensor, list[torch.Tensor], LstmState]:
    """The forward stack over positions start .. stop - 1: the tokens (B, w, P), L layers (B, w, P) zero at padding,
    the state after the window."""
    window_mask = mask[:, start:stop]  # (B, w)
    positions = torch.arange(start, stop, device=mask.device).expand(mask.shape[0], -1)  # (B, w)
    x = _masked(tokens, positions, window_mask)
    layers, state = stack(x, window_mask, state)
    float_mask = window_mask.unsqueeze(-1).to(x.dtype)
    return x, [layer * float_mask for layer in layers], state


def _backward_window(stack: LstmStack, tokens: TokenLookup, mask: torch.Tensor, lengths: torch.Tensor, start: int,
                     stop: int, state: LstmState) -> tuple[tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]],
                                                            LstmState]:
    """The backward stack over steps start .. stop - 1 of each row read reversed (step r reads position
    length - 1 - r): where each step's vectors go, (row, position) of the steps that exist, with the L layers'
    vectors there (N, P), and the state after the window."""
    window_mask = mask[:, start:stop]  # (B, w): the reversed rows are left-aligned too
    steps = torch.arange(start, stop, device=mask.device).unsqueeze(0)  # (1, w)
    positions = (lengths.unsqueeze(1) - 1 - steps).clamp(min=0)  # (B, w)
    x = _masked(tokens, positions, window_mask)
    layers, state = stack(x, window_mask, state)
    rows, at = window_mask.nonzero(as_tuple=True)  # (N,), (N,)
    return (rows, positions[rows, at], [layer[rows, at] for layer in layers]), state
