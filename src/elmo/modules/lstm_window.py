"""The training path of :class:`~elmo.modules.lstm.LstmCellWithProjection`: one autograd node per layer and window.

Autograd would record about a dozen nodes per time step and, going backward, compute the recurrent and projection
weight gradients once per step. Here the forward loop runs without recording and keeps what the backward needs;
the backward loop (backpropagation through time, written out with :func:`~elmo.modules.lstm_kernel.step_backward`)
does one GEMM per step for the recurrence and one for the projection, and each weight gradient is then one large
GEMM over all T steps.

A window runs G independent layers of one shape in lockstep (the biLM's forward and backward layers: G = 2): each
step is one batched GEMM and one set of elementwise ops for all G, so the per-op overhead, a large share at 32 rows
on a CPU, is paid once instead of G times.

Both loops are pure functions (:func:`forward_steps`, :func:`backward_steps`) over the kernel's steps: with compiling
on (:func:`~elmo.runtime.compile_switch.set_compile`) they run through ``torch.compile``, which fuses each step's
elementwise work into a few kernels, else eagerly; either backward can follow either forward.

Under bf16 autocast the GEMMs read bfloat16 operands (weights are cast once per window), while the gate math, the
cells, the outputs and the state gradients stay float32: low precision where it pays (the matrix units), full
precision where errors would add up over time steps. The projected outputs are exact in bfloat16 (a bf16 GEMM's
output), so they stay in that dtype for the next step's GEMM. The gradients of the inputs and the weights come back
in their own dtypes, as autograd through bf16 GEMMs would give them.

Shapes: G layers, T steps, B rows, C cells, P projection (the output; P = C when there is no projection).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from elmo.modules.autocast import autocast_suspended
from elmo.modules.compiled import compile_enabled, run_compiled
from elmo.modules.lstm_kernel import Step, step_backward, step_forward

_WHAT = "the LSTM step loops"  # for the warning when compiling fails


def run_windows(layers: Sequence, inputs: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]):
    """G :class:`~elmo.modules.lstm.LstmCellWithProjection` layers of one shape, each over its own training window,
    in lockstep: inputs (G, T, B, in), state (h (G, B, P), c (G, B, C)) -> outputs (G, T, B, P) and the final
    (h, c). Under autocast the GEMMs run in the autocast dtype; the cells, outputs and state stay float32."""
    first = layers[0]
    groups, time, batch, _ = inputs.shape
    device_type = inputs.device.type
    dtype = torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else inputs.dtype
    w_in = StackedWeights.apply(dtype, *(layer.input_linearity.weight for layer in layers))  # (G, 4C, in)
    b_in = torch.stack([layer.input_linearity.bias for layer in layers]).unsqueeze(1)  # (G, 1, 4C)
    x_gates = InputGates.apply(inputs.reshape(groups, time * batch, -1), w_in, b_in)
    x_gates = x_gates.view(groups, time, batch, -1)  # (G, T, B, 4C): all steps in one GEMM
    w_state = StackedWeights.apply(dtype, *(layer._recurrent_weight() for layer in layers))  # (G, 4C, P)
    w_proj = None
    if first.projection is not None:
        w_proj = StackedWeights.apply(dtype, *(layer.projection.weight for layer in layers))  # (G, P, C)
    proj_clip = first.proj_clip if first.projection is not None else None
    with autocast_suspended(inputs.device) as matmul_dtype:
        out, h, c = LstmWindow.apply(x_gates, state[0], state[1], w_state, w_proj, first.forget_bias,
                                     first.cell_clip, proj_clip, matmul_dtype)
    return out, (h, c)


class LstmWindow(torch.autograd.Function):
    """(x_gates (G, T, B, 4C), h0 (G, B, P), c0 (G, B, C), W_state (G, 4C, P), W_proj (G, P, C) or None, forget_bias,
    cell_clip, proj_clip, matmul_dtype) -> (outputs (G, T, B, P), h_T (G, B, P), c_T (G, B, C))."""

    @staticmethod
    def forward(ctx, x_gates, h0, c0, w_state, w_proj, forget_bias, cell_clip, proj_clip, matmul_dtype=None):
        ctx.clips = cell_clip, proj_clip
        ctx.dtypes = x_gates.dtype, w_state.dtype
        mm = matmul_dtype if matmul_dtype is not None else c0.dtype
        w_state, w_proj = w_state.to(mm), None if w_proj is None else w_proj.to(mm)
        acts, c_seq, c_pre, tanh_c, h_seq, p_pre, hidden = _run(
            forward_steps, x_gates, h0, c0, w_state, w_proj, forget_bias, cell_clip, proj_clip)
        _save(ctx, (acts, c_seq, c_pre, tanh_c), h_seq, p_pre, w_state, w_proj,
              hidden if w_proj is not None else None)
        outputs = h_seq[:, 1:].to(c0.dtype, copy=True) if w_proj is not None else hidden
        return outputs, outputs[:, -1].clone(), c_seq[-1].clone()

    @staticmethod
    def backward(ctx, d_outputs, d_h_last, d_c_last):
        (acts, c_seq, c_pre, tanh_c), (h_seq, p_pre, w_state, w_proj, hidden) = _saved(ctx)
        cell_clip, _ = ctx.clips
        d_gates, d_h, d_c, d_proj_in = _run(backward_steps, acts, c_seq, c_pre, tanh_c, h_seq, p_pre, w_state,
                                            w_proj, cell_clip, d_outputs, d_h_last, d_c_last)
        x_dtype, w_dtype = ctx.dtypes
        groups, time, batch, four_c = d_gates.shape
        rows = time * batch
        # both weight gradients as one GEMM each over all T steps
        d_w_state = torch.bmm(d_gates.view(groups, rows, four_c).transpose(1, 2),
                              h_seq[:, :time].reshape(groups, rows, -1)).to(w_dtype)  # (G, 4C, P)
        d_w_proj = None
        if w_proj is not None:
            d_w_proj = torch.bmm(d_proj_in.view(groups, rows, -1).transpose(1, 2),
                                 hidden.reshape(groups, rows, -1)).to(w_dtype)  # (G, P, C)
        return d_gates.to(x_dtype), d_h, d_c, d_w_state, d_w_proj, None, None, None, None


def _run(loop, *args):
    """``loop(*args)``, through ``torch.compile`` when compiling is on (eagerly if that fails)."""
    result = run_compiled(loop, _WHAT, *args) if compile_enabled() else None
    return result if result is not None else loop(*args)


def _save(ctx, per_step, *rest):
    """save_for_backward of the per-step lists (acts, c_0 .. c_T, c_pre, tanh_c: T or T + 1 tensors (G, B, .) each,
    kept as the step loop made them: stacking them would copy the window's largest activations once more) and of
    the window-wide tensors ``rest``."""
    ctx.list_lengths = [len(steps) for steps in per_step]
    ctx.save_for_backward(*(x for steps in per_step for x in steps), *rest)


def _saved(ctx):
    """What :func:`_save` saved: (the per-step lists, the rest)."""
    saved, lists = ctx.saved_tensors, []
    for n in ctx.list_lengths:
        lists.append(list(saved[:n]))
        saved = saved[n:]
    return lists, saved


def forward_steps(x_gates, h0, c0, w_state, w_proj, forget_bias, cell_clip, proj_clip):
    """The window's forward loop: x_gates (G, T, B, 4C), h0, c0, w_state (G, 4C, P), w_proj (G, P, C) or None, in
    the GEMM dtype -> (acts, c_seq, c_pre, tanh_c, h_seq, p_pre, hidden) as :class:`LstmWindow` saves them: the first
    four as lists of per-step (G, B, .) tensors (T + 1 cells c_0 .. c_T, T of the others), h_seq (G, T + 1, B, P)
    h_0 .. h_T in the GEMM dtype, p_pre (G, T, B, P) or None, hidden (G, T, B, C)."""
    acc, mm = c0.dtype, w_state.dtype
    x = x_gates.to(acc)
    # the step GEMMs read their weights contiguous (G, in, out): faster than transposed views on CPU
    w_state_t = w_state.transpose(1, 2).contiguous()  # (G, P, 4C)
    w_proj_t = None if w_proj is None else w_proj.transpose(1, 2).contiguous()  # (G, C, P)
    h, c = h0.to(mm), c0
    steps = []
    for t in range(x.shape[1]):
        step = step_forward(x[:, t], h, c, w_state_t, w_proj_t, forget_bias, cell_clip, proj_clip)
        steps.append(step)
        h, c = step.h, step.c
    cs = [c0, *(step.c for step in steps)]
    p_pre = torch.stack([step.p_pre for step in steps], dim=1) if steps and steps[0].p_pre is not None else None
    return ([step.acts for step in steps], cs, [step.c_pre for step in steps], [step.tanh_c for step in steps],
            torch.stack([h0.to(mm), *(step.h for step in steps)], dim=1), p_pre,
            torch.stack([step.hidden for step in steps], dim=1))


def backward_steps(acts, c_seq, c_pre, tanh_c, h_seq, p_pre, w_state, w_proj, cell_clip, d_outputs, d_h_last,
                   d_c_last):
    """The window's backward loop over what :func:`forward_steps` returned -> (d_gates (G, T, B, 4C) in the GEMM
    dtype, d_h0 (G, B, P), d_c0 (G, B, C), d_proj_in (G, T, B, P) in the GEMM dtype or None)."""
    acc = acts[0].dtype
    time, (groups, batch, four_c) = len(acts), acts[0].shape
    d_h = d_h_last if d_h_last is not None else acts[0].new_zeros(groups, batch, h_seq.shape[-1])
    d_c = d_c_last if d_c_last is not None else acts[0].new_zeros(groups, batch, four_c // 4)
    if d_outputs is not None:
        d_h = d_h + d_outputs[:, time - 1]
    d_gates, d_pres = [], []
    for t in range(time - 1, -1, -1):
        step = Step(acts[t], c_pre[t], c_seq[t + 1], tanh_c[t], None, None if p_pre is None else p_pre[:, t],
                    h_seq[:, t + 1])
        g, d_h, d_c, d_pre = step_backward(d_h, d_c, step, c_seq[t], w_state, w_proj, cell_clip)
        d_gates.append(g)
        d_pres.append(d_pre)
        d_h = d_h.to(acc) if d_outputs is None or t == 0 else d_outputs[:, t - 1] + d_h
    d_proj_in = torch.stack(d_pres[::-1], dim=1) if w_proj is not None else None
    return torch.stack(d_gates[::-1], dim=1), d_h, d_c, d_proj_in


class InputGates(torch.autograd.Function):
    """(inputs (G, N, in), weight (G, 4C, in), bias (G, 1, 4C)) -> inputs weight^T + bias (G, N, 4C): the input half
    of the gates of every step. Its backward computes the weight's gradient as d_out^T inputs, already in the
    weight's (G, 4C, in) layout: autograd's gradient of ``weight.transpose(1, 2)`` comes out transposed, and a
    transposed copy into a contiguous ``.grad`` is slow on CPU. The backward runs in the output's dtype (autocast's,
    when the forward ran under it), as autograd's would."""

    @staticmethod
    def forward(ctx, inputs, weight, bias):
        ctx.save_for_backward(inputs, weight)
        return torch.baddbmm(bias, inputs, weight.transpose(1, 2))

    @staticmethod
    def backward(ctx, grad):
        inputs, weight = ctx.saved_tensors
        d_inputs = torch.bmm(grad, weight.to(grad.dtype)) if ctx.needs_input_grad[0] else None
        d_weight = torch.bmm(grad.transpose(1, 2), inputs.to(grad.dtype))  # (G, 4C, in)
        return d_inputs, d_weight, grad.sum(1, keepdim=True)  # the bias's as autograd sums it: in grad's dtype


class StackedWeights(torch.autograd.Function):
    """(dtype, G weights of one shape) -> (G, ...) in ``dtype``: cast and stacked in one pass (not a stack, then
    autocast's cast); backward hands each weight its gradient in the weight's dtype as a new contiguous tensor,
    which autograd keeps as ``.grad`` as it is (slices of one stacked gradient, or a gradient laid out transposed,
    as a GEMM of the transposed weights returns it, would each be copied again)."""

    @staticmethod
    def forward(ctx, dtype, *weights):
        ctx.dtypes = [w.dtype for w in weights]
        stacked = weights[0].new_empty((len(weights), *weights[0].shape), dtype=dtype)
        for g, weight in enumerate(weights):
            stacked[g].copy_(weight)
        return stacked

    @staticmethod
    def backward(ctx, grad):
        return None, *(grad[g].to(dtype, memory_format=torch.contiguous_format, copy=True)
                       for g, dtype in enumerate(ctx.dtypes))
