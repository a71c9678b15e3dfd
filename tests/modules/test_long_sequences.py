"""A long batch run a window of steps at a time equals one call over the whole batch, bit for bit (fp32, CPU)."""

from __future__ import annotations

import contextlib

import pytest
import torch

from elmo.modules.long_sequences import MIN_WINDOW, contextualize_in_windows, windows
from elmo.runtime.threads import small_ops_on_one_thread
from tests.conftest import random_bilm

P = 8  # the tiny config's projection


def _whole_and_windowed(bilm, lengths: list[int], window: int, state=None, offset: int = 0):
    """The layers of one call (B, L + 1, T, 2P) at positions offset .. T - 2 * offset, the windows' (every entry
    written), and both final states."""
    generator = torch.Generator().manual_seed(len(lengths))
    time = max(lengths)
    mask = torch.arange(time).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)  # (B, T)
    tokens = torch.randn(len(lengths), time, P, generator=generator) * mask.unsqueeze(-1)  # (B, T, P)
    out = torch.full((len(lengths), bilm.num_layers, time - 2 * offset, 2 * P), float("nan"))
    with torch.inference_mode():
        whole = bilm.contextualize(tokens, mask, state)
        final = contextualize_in_windows(bilm, lambda at: tokens.gather(1, at.unsqueeze(-1).expand(-1, -1, P)), mask,
                                         out, state, window=window, offset=offset)
    return torch.stack(whole.layers, dim=1)[:, :, offset : time - offset], whole.state, out, final


@pytest.mark.parametrize("lengths, window, two_cores", [
    ([502], 64, True),  # one row, the last window shorter
    ([502, 7, 1, 0, 261, 134], 64, True),  # rows ending inside windows, before them, an empty row
    ([502, 7, 1, 0, 261, 134], 64, False),
    ([2049], 100, True),  # beyond the LSTM's 2,048-row input group: a last group of one step
])
def test_windows_equal_the_whole_batch_bit_for_bit(lengths, window, two_cores):
    bilm = random_bilm()
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        # as the Embedder runs it (the directions side by side), and as plain torch does
        with small_ops_on_one_thread("cpu") if two_cores else contextlib.nullcontext():
            layers, state, out, final = _whole_and_windowed(bilm, lengths, window)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(layers, out)
    assert torch.equal(state[0], final[0]) and torch.equal(state[1], final[1])


def test_an_output_without_the_boundaries_keeps_only_their_positions():
    """The Embedder's layout: positions 1 .. T - 2 (``<S>`` dropped, the longest row's ``</S>`` too)."""
    layers, _, out, _ = _whole_and_windowed(random_bilm(), [300, 90, 3], 64, offset=1)
    assert out.shape[2] == 298 and torch.equal(layers, out)


def test_the_state_is_carried_in_and_out():
    """A given start state (carry, warm) is where every row starts, and the final state is the whole call's."""
    bilm = random_bilm()
    h, c = bilm.zero_state(3)
    generator = torch.Generator().manual_seed(1)
    state = (torch.randn(h.shape, generator=generator), torch.randn(c.shape, generator=generator))
    layers, whole, out, final = _whole_and_windowed(bilm, [300, 90, 3], 64, state)
    assert torch.equal(layers, out)
    assert torch.equal(whole[0], final[0]) and torch.equal(whole[1], final[1])
    assert not torch.equal(final[0], _whole_and_windowed(bilm, [300, 90, 3], 64)[3][0])  # the start mattered


def test_windows_cut_the_lstm_input_groups_and_never_leave_a_short_piece():
    lengths = torch.tensor([5000])
    assert windows(lengths, 1000, group_rows=2048) == [
        (0, 1000), (1000, 2048),  # 2,000 .. 2,048 would be 48 steps: joined to the piece before
        (2048, 3048), (3048, 4096), (4096, 5000)]
    assert windows(lengths, 10, group_rows=2048)[0] == (0, MIN_WINDOW)  # no window below MIN_WINDOW steps
    assert windows(torch.tensor([2049]), 4096, group_rows=2048) == [(0, 2048), (2048, 2049)]  # the group's own
    spans = windows(torch.tensor([700, 300, 5]), 64, group_rows=256)
    assert [s for s, _ in spans] == sorted({s for s, _ in spans}) and spans[0][0] == 0 and spans[-1][1] == 700
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))  # consecutive, every step once
