"""The hand-written backward of the LSTM paths with gradients (the training window, the masked steps) against
autograd through a step-by-step cell written with plain torch ops."""

from __future__ import annotations

import pytest
import torch

from elmo.modules import lstm_window
from elmo.modules.compiled import compile_enabled, compiled
from elmo.modules.lstm import LstmCellWithProjection, LstmStack, run_stacks_in_lockstep
from elmo.modules.lstm_window import InputGates, LstmWindow, StackedWeights
from elmo.runtime.compile_switch import compile_setting


def _cell(projection: bool, clip: float | None, seed: int = 0) -> LstmCellWithProjection:
    torch.manual_seed(seed)
    cell = LstmCellWithProjection(5, 6, 4 if projection else 6, cell_clip=clip, proj_clip=clip).double()
    with torch.no_grad():
        for p in cell.parameters():
            p.normal_(0.0, 0.8)  # large enough that both clips are active somewhere
    return cell


def _autograd_run(cell: LstmCellWithProjection, x, mask, state):
    """TF's LSTMCell with projection and clips, one step at a time with autograd recording every op."""
    h, c = state
    outputs = []
    for t in range(x.shape[1]):
        gates = cell.input_linearity(x[:, t]) + h @ cell.state_linearity.weight.t()
        i, j, f, o = gates.chunk(4, dim=1)
        c = torch.sigmoid(f + cell.forget_bias) * c + torch.sigmoid(i) * torch.tanh(j)
        if cell.cell_clip is not None:
            c = c.clamp(-cell.cell_clip, cell.cell_clip)
        h = torch.sigmoid(o) * torch.tanh(c)
        if cell.projection is not None:
            h = cell.projection(h)
            if cell.proj_clip is not None:
                h = h.clamp(-cell.proj_clip, cell.proj_clip)
        outputs.append(h)
    return torch.stack(outputs, dim=1), (h, c)


def _inputs(seed: int = 1):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(3, 7, 5, dtype=torch.float64, generator=generator)


@pytest.mark.parametrize("projection", [True, False])
@pytest.mark.parametrize("clip", [None, 0.5])
def test_window_matches_autograd_values_and_gradients(projection, clip):
    cell = _cell(projection, clip)
    x = _inputs().requires_grad_()
    h0 = torch.randn(3, cell.output_dim, dtype=torch.float64, requires_grad=True)
    c0 = torch.randn(3, 6, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(3, 7, cell.output_dim, dtype=torch.float64)

    def loss(run):
        out, (h, c) = run(x, None, (h0, c0))
        return (out * weights).sum() + (h * 0.3).sum() + (c * 0.7).sum(), out, h, c

    results = []
    for run in (lambda *a: _autograd_run(cell, *a), cell._run_autograd, cell.forward):  # reference, masked, window
        total, out, h, c = loss(run)
        grads = torch.autograd.grad(total, [x, h0, c0, *cell.parameters()])
        results.append((out, h, c, grads))
    (out_a, h_a, c_a, grads_a) = results[0]
    assert "LstmStepBackward" in _node_names(results[1][0]) and "LstmWindowBackward" in _node_names(results[2][0])
    for out_b, h_b, c_b, grads_b in results[1:]:
        torch.testing.assert_close(out_b, out_a, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(h_b, h_a, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(c_b, c_a, rtol=1e-12, atol=1e-12)
        names = ["x", "h0", "c0", *(n for n, _ in cell.named_parameters())]
        for name, ga, gb in zip(names, grads_a, grads_b):
            torch.testing.assert_close(gb, ga, rtol=1e-10, atol=1e-10, msg=name)
    if clip is not None:
        assert (c_a.abs() == clip).any() or (out_a.abs() == clip).any(), "the clips must be exercised"


@pytest.mark.parametrize("projection", [True, False])
def test_gradcheck_two_layers_in_lockstep(projection):
    cells = [_cell(projection, 0.5, seed) for seed in (0, 1)]
    x_gates = torch.stack([cell.input_linearity(_inputs(seed)).transpose(0, 1) for seed, cell in enumerate(cells)])
    x_gates = x_gates.detach().requires_grad_()  # (2, T, B, 4C)
    p = cells[0].output_dim
    h0 = torch.randn(2, 3, p, dtype=torch.float64, requires_grad=True)
    c0 = torch.randn(2, 3, 6, dtype=torch.float64, requires_grad=True)
    w_state = torch.stack([c.state_linearity.weight for c in cells]).detach().requires_grad_()
    if projection:
        w_proj = torch.stack([c.projection.weight for c in cells]).detach().requires_grad_()
        inputs = (x_gates, h0, c0, w_state, w_proj)
        torch.autograd.gradcheck(lambda *a: LstmWindow.apply(*a, 1.0, 0.5, 0.5), inputs, fast_mode=True)
    else:
        inputs = (x_gates, h0, c0, w_state)
        torch.autograd.gradcheck(lambda *a: LstmWindow.apply(*a, None, 1.0, 0.5, None), inputs, fast_mode=True)


def test_lockstep_stacks_equal_each_stack_on_its_own():
    torch.manual_seed(0)
    stacks = [LstmStack([LstmCellWithProjection(4, 6, 4, 3.0, 3.0) for _ in range(2)], residual=True) for _ in range(2)]
    x = torch.randn(2, 5, 3, 4, dtype=torch.float64, requires_grad=True)  # (G, T, B, in)
    state = (torch.randn(2, 2, 3, 4, dtype=torch.float64), torch.randn(2, 2, 3, 6, dtype=torch.float64))
    for stack in stacks:
        stack.double()
    top, (h, c) = run_stacks_in_lockstep(stacks, x, state)
    grads = torch.autograd.grad(top.square().sum() + h.sum() + c.sum(), [x, *stacks[0].parameters()])
    for g, stack in enumerate(stacks):
        layers, (h_g, c_g) = stack(x[g].transpose(0, 1), None, (state[0][g], state[1][g]))
        torch.testing.assert_close(top[g], layers[-1].transpose(0, 1), rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(h[g], h_g, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(c[g], c_g, rtol=1e-12, atol=1e-12)
        if g == 0:
            own = torch.autograd.grad(layers[-1].square().sum() + h_g.sum() + c_g.sum(), [x, *stack.parameters()])
            torch.testing.assert_close(grads[0][0], own[0][0], rtol=1e-10, atol=1e-10)
            for a, b in zip(grads[1:], own[1:]):
                torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_stacked_weights_cast_once_and_hand_back_gradients_in_each_weights_dtype():
    weights = [torch.randn(6, 4, requires_grad=True) for _ in range(2)]
    stacked = StackedWeights.apply(torch.bfloat16, *weights)  # (2, 6, 4)
    assert stacked.dtype == torch.bfloat16
    assert torch.equal(stacked.float(), torch.stack([w.detach().bfloat16().float() for w in weights]))
    upstream = torch.randn(2, 4, 6).bfloat16().transpose(1, 2)  # laid out as a GEMM with W^T returns it
    # contiguous as handed over: the layout autograd keeps as .grad without copying it again
    assert all(grad.is_contiguous() for grad in torch.autograd.grad(stacked, weights, upstream, retain_graph=True))
    stacked.backward(upstream)
    for g, weight in enumerate(weights):
        assert weight.grad.dtype == torch.float32 and torch.equal(weight.grad, upstream[g].float())
    storages = {w.grad.untyped_storage().data_ptr() for w in weights}
    assert len(storages) == 2  # each gradient owns its memory (autograd keeps it as .grad without a copy)


@pytest.mark.parametrize("bf16", [False, True])
def test_input_gates_match_autograd_and_hand_back_the_weights_layout(bf16):
    torch.manual_seed(0)
    dtype = torch.float32 if bf16 else torch.float64
    x = torch.randn(2, 9, 5, dtype=dtype, requires_grad=True)  # (G, N, in)
    weight = torch.randn(2, 8, 5, dtype=dtype, requires_grad=True)  # (G, 4C, in)
    bias = torch.randn(2, 1, 8, dtype=dtype, requires_grad=True)
    upstream = torch.randn(2, 9, 8, dtype=dtype)
    results = []
    for run in (InputGates.apply, lambda x, w, b: torch.baddbmm(b, x, w.transpose(1, 2))):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = run(x, weight.to(torch.bfloat16) if bf16 else weight, bias)
        results.append((out, *torch.autograd.grad(out, [x, weight, bias], upstream.to(out.dtype))))
    for ours, autograd in zip(*results):
        assert ours.dtype == autograd.dtype and torch.equal(ours, autograd)  # the same GEMMs, the same sums
    assert results[0][2].is_contiguous()  # the weight's gradient, in the weight's layout


def test_bf16_window_gradients_are_close_to_float32():
    """Under bf16 autocast the GEMMs read bf16 operands; the weight gradients still reach every float32 weight and
    agree with the float32 computation to bf16 precision."""
    torch.manual_seed(0)
    stacks = [LstmStack([LstmCellWithProjection(16, 32, 16, 3.0, 3.0) for _ in range(2)], residual=True)
              for _ in range(2)]
    x = torch.randn(2, 6, 4, 16)  # (G, T, B, in)
    state = (torch.zeros(2, 2, 4, 16), torch.zeros(2, 2, 4, 32))
    params = [p for stack in stacks for p in stack.parameters()]
    grads = []
    for bf16 in (False, True):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            top, _ = run_stacks_in_lockstep(stacks, x, state)
        grads.append(torch.autograd.grad(top.float().square().sum(), params))
    for fp32, bf16 in zip(*grads):
        assert bf16.dtype == torch.float32
        assert (bf16 - fp32).norm() <= 0.05 * fp32.norm()


def _node_names(tensor: torch.Tensor, depth: int = 4) -> set[str]:
    """Names of the autograd nodes within ``depth`` steps of ``tensor``."""
    names, frontier = set(), [tensor.grad_fn]
    for _ in range(depth):
        frontier = [f for node in frontier if node is not None for f, _ in node.next_functions] + frontier
        names |= {type(node).__name__ for node in frontier if node is not None}
    return names


def test_training_uses_the_window_and_masked_batches_do_not():
    cell = _cell(True, 3.0).float()
    x = torch.randn(2, 4, 5, requires_grad=True)
    out, _ = cell(x)
    assert "LstmWindowBackward" in _node_names(out)
    mask = torch.tensor([[True] * 4, [True, True, False, False]])
    out_masked, _ = cell(x, mask)
    assert not torch.equal(out_masked[1, 2:], out[1, 2:]) and torch.all(out_masked[1, 2:] == 0)


def test_bf16_autocast_window_keeps_float32_state_and_stays_close():
    torch.manual_seed(0)
    cell = LstmCellWithProjection(16, 32, 8, cell_clip=3.0, proj_clip=3.0)
    x = torch.randn(4, 9, 16, requires_grad=True)
    state = (torch.randn(4, 8) * 0.5, torch.randn(4, 32))
    results = []
    for bf16 in (False, True):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out, (h, c) = cell(x, None, state)
        assert out.dtype == h.dtype == c.dtype == torch.float32
        grads = torch.autograd.grad(out.square().sum() + h.sum() + c.sum(), [x, *cell.parameters()])
        assert all(g.dtype == torch.float32 for g in grads)
        results.append((out, h, c, *grads))
    for fp32, bf16 in zip(*results):
        assert (bf16 - fp32).norm() / fp32.norm() < 2e-2  # bf16 GEMM operands, float32 gate math and cells


def _window_case(dtype, projection=True, clip=0.5, seed=0):
    """G = 2 layers of 3 steps, B = 3, C = 5, P = 4, with weights large enough that both clips bind somewhere."""
    generator = torch.Generator().manual_seed(seed)
    p = 4 if projection else 5
    shapes = [(2, 3, 3, 20), (2, 3, p), (2, 3, 5), (2, 20, p)] + ([(2, p, 5)] if projection else [])
    tensors = [(2 * torch.randn(s, dtype=dtype, generator=generator)).requires_grad_() for s in shapes]
    if not projection:
        tensors.append(None)
    return tensors, (1.0, clip, clip if projection else None)


def _window_values_and_gradients(inputs, constants, matmul_dtype, use_compile):
    with compile_setting(use_compile):
        out, h, c = LstmWindow.apply(*inputs, *constants, matmul_dtype)
        weights = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view(out.shape)
        loss = (out * weights).sum() + h.square().sum() + c.sum()
        return [out, h, c, *torch.autograd.grad(loss, [x for x in inputs if x is not None])]


@pytest.mark.parametrize("dtype, matmul_dtype, tolerance", [(torch.float64, None, 1e-12),
                                                            (torch.float32, torch.bfloat16, 1e-5)])
def test_compiled_step_loops_match_the_eager_ones(dtype, matmul_dtype, tolerance):
    """``compile``: the step loops through torch.compile give the eager loops' values and gradients."""
    inputs, constants = _window_case(dtype)
    eager = _window_values_and_gradients(inputs, constants, matmul_dtype, use_compile=False)
    ours = _window_values_and_gradients(inputs, constants, matmul_dtype, use_compile=True)
    # compiled for real, no fallback
    assert compiled(lstm_window.forward_steps) and compiled(lstm_window.backward_steps)
    for name, a, b in zip(["out", "h", "c", "d_x_gates", "d_h0", "d_c0", "d_w_state", "d_w_proj"], eager, ours):
        assert a.dtype == b.dtype, name
        torch.testing.assert_close(b, a, rtol=tolerance, atol=tolerance, msg=name)


def test_compiled_loops_without_projection_match_the_eager_ones():
    inputs, constants = _window_case(torch.float64, projection=False)
    eager = _window_values_and_gradients(inputs, constants, None, use_compile=False)
    ours = _window_values_and_gradients(inputs, constants, None, use_compile=True)
    for a, b in zip(eager, ours):
        torch.testing.assert_close(b, a, rtol=1e-12, atol=1e-12)


def test_the_eager_backward_can_follow_the_compiled_forward(monkeypatch):
    """A compile failure between the forward and the backward (``run_compiled`` returns None) lets the eager
    backward take over."""
    inputs, constants = _window_case(torch.float64)
    eager = _window_values_and_gradients(inputs, constants, None, use_compile=False)
    compile_and_run = lstm_window.run_compiled
    monkeypatch.setattr(lstm_window, "run_compiled", lambda function, *args: (
        None if function is lstm_window.backward_steps else compile_and_run(function, *args)))
    mixed = _window_values_and_gradients(inputs, constants, None, use_compile=True)
    assert compiled(lstm_window.forward_steps)
    for a, b in zip(eager, mixed):
        torch.testing.assert_close(b, a, rtol=1e-12, atol=1e-12)


def test_a_failing_compile_falls_back_to_the_eager_loops_with_a_warning(monkeypatch, caplog):
    from elmo.modules import compiled as compiled_module

    def broken_compile(function, **_):
        def run(*args):
            raise RuntimeError("no C++ compiler found")
        return run

    monkeypatch.setattr(compiled_module, "_compiled_functions", {})
    monkeypatch.setattr(compiled_module, "_compile_failure", [])
    monkeypatch.setattr(compiled_module.torch, "compile", broken_compile)
    inputs, constants = _window_case(torch.float64)
    eager = _window_values_and_gradients(inputs, constants, None, use_compile=False)
    with caplog.at_level("WARNING"), compile_setting(True):
        fallback = _window_values_and_gradients(inputs, constants, None, use_compile=True)
        assert not compile_enabled()  # the eager code for the rest of the process
    assert "torch.compile of the LSTM step loops failed (RuntimeError: no C++ compiler found)" in caplog.text
    for a, b in zip(eager, fallback):
        assert torch.equal(a, b)
