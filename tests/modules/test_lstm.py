from __future__ import annotations

import numpy as np
import pytest
import torch

from elmo.modules.lstm import LstmCellWithProjection, LstmStack


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _reference_run(cell: LstmCellWithProjection, x: np.ndarray, h: np.ndarray, c: np.ndarray):
    """TF LSTMCell(num_proj, cell_clip, proj_clip, forget_bias=1) in float64, one step at a time."""
    w_in = cell.input_linearity.weight.detach().double().numpy()
    bias = cell.input_linearity.bias.detach().double().numpy()
    w_state = cell.state_linearity.weight.detach().double().numpy()
    outputs = []
    for t in range(x.shape[1]):
        gates = x[:, t] @ w_in.T + h @ w_state.T + bias
        i, j, f, o = np.split(gates, 4, axis=1)
        c = _sigmoid(f + 1.0) * c + _sigmoid(i) * np.tanh(j)
        if cell.cell_clip is not None:
            c = np.clip(c, -cell.cell_clip, cell.cell_clip)
        h = _sigmoid(o) * np.tanh(c)
        if cell.projection is not None:
            h = h @ cell.projection.weight.detach().double().numpy().T
            if cell.proj_clip is not None:
                h = np.clip(h, -cell.proj_clip, cell.proj_clip)
        outputs.append(h)
    return np.stack(outputs, axis=1), h, c


@pytest.mark.parametrize("projection_dim", [3, 7])
def test_cell_matches_tf_formula_with_clipping(projection_dim):
    cell = LstmCellWithProjection(5, 7, projection_dim, cell_clip=0.5, proj_clip=0.3)
    with torch.no_grad():
        for p in cell.parameters():
            p.normal_(0, 1.5)  # large weights so that both clips are active
    x = torch.randn(2, 6, 5)
    h0, c0 = torch.randn(2, projection_dim) * 0.1, torch.randn(2, 7) * 0.1
    out, (h, c) = cell(x, state=(h0, c0))
    ref_out, ref_h, ref_c = _reference_run(cell, x.double().numpy(), h0.double().numpy(), c0.double().numpy())
    np.testing.assert_allclose(out.detach().numpy(), ref_out, atol=1e-5)
    np.testing.assert_allclose(h.detach().numpy(), ref_h, atol=1e-5)
    np.testing.assert_allclose(c.detach().numpy(), ref_c, atol=1e-5)
    assert c.abs().max() <= 0.5 + 1e-7 and np.isclose(np.abs(ref_c).max(), 0.5)  # the cell clip was hit
    if projection_dim < 7:
        assert out.abs().max() <= 0.3 + 1e-7 and np.isclose(np.abs(ref_out).max(), 0.3)  # so was the projection clip
    else:
        assert cell.projection is None  # no projection, so TF applies no projection clip either


@pytest.mark.parametrize("masked", [False, True])  # the BPTT window and the step-by-step autograd path
def test_weight_dropout_masks_the_recurrent_matrix_once_per_call(masked):
    cell = LstmCellWithProjection(4, 6, 3, cell_clip=3, proj_clip=3, weight_dropout=0.5).double()
    x, h0, c0 = torch.randn(2, 5, 4).double(), torch.randn(2, 3).double(), torch.randn(2, 6).double()
    mask = torch.ones(2, 5, dtype=torch.bool) if masked else None
    torch.manual_seed(3)
    out, (h, c) = cell(x, mask, (h0, c0))
    torch.manual_seed(3)  # the same uniform draw: this call's DropConnect mask times 1 / (1 - p)
    keep = (torch.rand_like(cell.state_linearity.weight) >= 0.5) / 0.5
    assert 0 < int((keep == 0).sum()) < keep.numel()
    with torch.no_grad():
        dropped = LstmCellWithProjection(4, 6, 3, cell_clip=3, proj_clip=3).double()
        dropped.load_state_dict(cell.state_dict())
        dropped.state_linearity.weight.mul_(keep)
    ref_out, ref_h, ref_c = _reference_run(dropped, x.numpy(), h0.numpy(), c0.numpy())
    np.testing.assert_allclose(out.detach().numpy(), ref_out, atol=1e-12)
    np.testing.assert_allclose(c.detach().numpy(), ref_c, atol=1e-12)
    out.sum().backward()
    grad = cell.state_linearity.weight.grad
    assert bool((grad[keep == 0] == 0).all()) and bool((grad[keep != 0] != 0).all())
    cell.eval()  # no DropConnect outside training
    eval_out, _ = cell(x, mask, (h0, c0))
    plain_out, _, _ = _reference_run(cell, x.numpy(), h0.numpy(), c0.numpy())
    np.testing.assert_allclose(eval_out.detach().numpy(), plain_out, atol=1e-12)


def test_weight_dropout_out_of_range_is_refused():
    with pytest.raises(ValueError, match=r"weight_dropout must be in \[0, 1\), got 1.0"):
        LstmCellWithProjection(4, 6, 3, None, None, weight_dropout=1.0)


def test_masked_rows_stop_at_their_last_token():
    cell = LstmCellWithProjection(4, 6, 3, cell_clip=3, proj_clip=3)
    x = torch.randn(2, 5, 4)
    mask = torch.tensor([[True] * 5, [True, True, False, False, False]])
    out, (h, c) = cell(x, mask)
    short_out, (short_h, short_c) = cell(x[1:, :2])
    torch.testing.assert_close(h[1], short_h[0], rtol=0, atol=1e-6)
    torch.testing.assert_close(c[1], short_c[0], rtol=0, atol=1e-6)
    torch.testing.assert_close(out[1, :2], short_out[0], rtol=0, atol=1e-6)
    assert out[1, 2:].eq(0).all()


def test_stack_residual_adds_layer_input_from_the_second_layer_on():
    cells = [LstmCellWithProjection(3, 5, 3, None, None) for _ in range(2)]
    stack = LstmStack(cells, residual=True)
    x = torch.randn(2, 4, 3)
    outputs, (h, c) = stack(x)
    first, _ = cells[0](x)
    second, _ = cells[1](first)
    torch.testing.assert_close(outputs[0], first)
    torch.testing.assert_close(outputs[1], second + first)
    assert h.shape == (2, 2, 3) and c.shape == (2, 2, 5)


def test_stack_state_in_and_out():
    stack = LstmStack([LstmCellWithProjection(3, 5, 3, None, None) for _ in range(2)], residual=False)
    x = torch.randn(2, 6, 3)
    full, state_full = stack(x)
    first, state = stack(x[:, :4])
    second, state_split = stack(x[:, 4:], state=state)
    torch.testing.assert_close(torch.cat([first[-1], second[-1]], 1), full[-1])
    torch.testing.assert_close(state_split[0], state_full[0])
    torch.testing.assert_close(state_split[1], state_full[1])


def test_step_windows_group_consecutive_steps_up_to_the_row_budget():
    from elmo.modules.lstm import step_windows

    assert step_windows([3, 3, 2, 1, 0, 0], 6) == [(0, 2, 6), (2, 4, 3)]
    assert step_windows([9, 2, 2], 4) == [(0, 1, 9), (1, 3, 4)]  # a step over the budget gets a window alone
    assert step_windows([0, 0], 4) == [] and step_windows([], 4) == []


def test_addmm_by_columns_equals_one_gemm_for_any_block_width():
    from elmo.modules.lstm import addmm_by_columns

    a, b, bias, start = torch.randn(5, 8), torch.randn(8, 24), torch.randn(24), torch.randn(5, 24)
    for columns in (None, 1, 5, 24, 100):
        out = start.clone()
        addmm_by_columns(out, a, b, columns=columns)
        torch.testing.assert_close(out, torch.addmm(start, a, b), rtol=1e-6, atol=1e-6)
        addmm_by_columns(out, a, b, bias, columns)  # with a bias, out's old values are ignored
        torch.testing.assert_close(out, torch.addmm(bias, a, b), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(("window_rows", "window_bytes", "columns"),
                         [(1, 1 << 20, 1024), (3, 1 << 20, 5), (7, 1 << 20, 1024), (2048, 1 << 20, 7),
                          (2048, 200, 1024), (2048, 1, 5)])  # 24 fp32 gate columns: 96 bytes a row, so 2 and 1 rows
def test_inference_path_equals_the_autograd_path_for_any_input_window(monkeypatch, window_rows, window_bytes,
                                                                       columns):
    import elmo.modules.lstm as lstm

    monkeypatch.setattr(lstm, "INPUT_WINDOW_ROWS", window_rows)
    monkeypatch.setattr(lstm, "INPUT_WINDOW_BYTES", window_bytes)
    monkeypatch.setattr(lstm, "CPU_GEMM_COLUMNS", columns)  # 24 gate columns: in blocks, with a remainder
    budgets, windows = [], lstm.step_windows
    monkeypatch.setattr(lstm, "step_windows", lambda running, rows: budgets.append(rows) or windows(running, rows))
    cell = LstmCellWithProjection(4, 6, 3, cell_clip=0.5, proj_clip=0.4)
    with torch.no_grad():
        for p in cell.parameters():
            p.normal_(0, 1.5)  # both clips active
    x = torch.randn(4, 5, 4)
    mask = torch.arange(5).unsqueeze(0) < torch.tensor([[3], [5], [0], [1]])  # unsorted lengths, one empty row
    state = (torch.randn(4, 3) * 0.1, torch.randn(4, 6) * 0.1)
    expected, (h, c) = cell(x, mask, state)
    with torch.no_grad():
        out, (h_inference, c_inference) = cell(x, mask, state)
    torch.testing.assert_close(out, expected.detach(), rtol=0, atol=1e-6)
    torch.testing.assert_close(h_inference, h.detach(), rtol=0, atol=1e-6)
    torch.testing.assert_close(c_inference, c.detach(), rtol=0, atol=1e-6)
    assert budgets == [min(window_rows, max(1, window_bytes // 96))]  # the row cap and the byte cap


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("window_rows", [2048, 5])
def test_a_word_table_gives_the_same_outputs_with_the_first_layer_once_per_word(monkeypatch, precision, window_rows):
    """The biLM over a batch given as distinct words (the embedder's way) equals it over the same token vectors, in
    both directions (the backward one reads the index reversed), for windows of any size, up to the GEMM's summation
    order (a row's product can depend on how many rows the GEMM has: MKL's small-matrix kernels, as at this test's
    tiny sizes; at the shipped and published sizes they are bit-identical, tests/embedding/test_embedder.py); the
    table path is taken by the first layer of each direction, and not where the table would not fit."""
    import elmo.modules.lstm as lstm
    from elmo.precision import Precision, for_precision
    from tests.conftest import random_bilm, tiny_config

    monkeypatch.setattr(lstm, "INPUT_WINDOW_ROWS", window_rows)
    bilm = for_precision(random_bilm(tiny_config()).eval(), Precision(precision))
    dim = bilm.token_encoder.output_dim
    vectors = torch.cat([torch.zeros(1, dim), torch.randn(6, dim)]).to(bilm.forward_lstm.layers[0].input_linearity
                                                                        .weight.dtype)  # (U+1, P), row 0 padding
    index = torch.tensor([[1, 2, 3, 2, 4, 5], [1, 3, 3, 6, 0, 0], [1, 6, 0, 0, 0, 0], [1, 4, 2, 5, 3, 0]])  # (B, T)
    tokens, mask = vectors[index], index > 0
    used = []
    word_gates = LstmCellWithProjection._word_gates
    monkeypatch.setattr(LstmCellWithProjection, "_word_gates",
                        lambda self, *args: used.append(word_gates(self, *args)) or used[-1])
    with torch.no_grad():
        plain = bilm.contextualize(tokens, mask)
        by_word = bilm.contextualize(tokens, mask, words=lstm.WordTable(vectors, index))
        assert sum(gates is not None for gates in used) == 2  # the first layer of each direction
        monkeypatch.setattr(lstm, "WORD_GATES_BYTES", 1)  # the table does not fit: per position, as before
        too_big = bilm.contextualize(tokens, mask, words=lstm.WordTable(vectors, index))
        assert sum(gates is not None for gates in used) == 2
    tolerance = 1e-6 if precision == "fp32" else 1e-2
    for a, b in zip(plain.layers, by_word.layers):
        torch.testing.assert_close(a, b, rtol=0, atol=tolerance)
    for a, b in zip(plain.state, by_word.state):
        torch.testing.assert_close(a, b, rtol=0, atol=tolerance)
    for a, b in zip(plain.layers, too_big.layers):
        assert torch.equal(a, b)
