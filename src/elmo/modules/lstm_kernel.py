"""The LSTM cell with projection, one time step forward and backward: the arithmetic every LSTM path runs.

The cell is TensorFlow's ``LSTMCell(num_units=C, num_proj=P, cell_clip, proj_clip, forget_bias)`` as bilm-tf uses it.
With gate pre-activations ``x W_x + b + h_{t-1} W_h`` in TF's order ``i, j, f, o``::

    c_t = clip(sigmoid(f + forget_bias) * c_{t-1} + sigmoid(i) * tanh(j), cell_clip)
    h_t = clip((sigmoid(o) * tanh(c_t)) W_P, proj_clip)          # W_P only when P < C

The forget offset is a constant of the cell, not part of the stored bias, so weights round-trip bit for bit. The
backward is written out from the saved activations (each gate's derivative read off its output); clipping passes
the gradient only where it left the value unchanged, as ``clamp`` does.

The functions write only to tensors they create and to ``gates``, which the caller hands over (inference also
hands over the cells, ``in_place``), so the training window runs them eagerly or through ``torch.compile`` alike
(:mod:`elmo.modules.lstm_window`). Two choices depend on the path. Training evaluates tanh as 2 sigmoid(2x) - 1
(one sigmoid pass covers all four gates, and it is cheaper than PyTorch's CPU tanh) and adds the forget offset to
each step's pre-activations. Inference and masked batches use ``torch.tanh`` (``exact_tanh``): the identity is off
by up to ~1e-7 near zero, enough to move ``elmo embed``'s outputs by a few 1e-6 and bf16 ones by a rounding step.
Inference also folds the offset into the input half, once for all steps, in the weights' dtype.

Shapes: ``...`` the leading dims (G layers and B rows, or B rows), C cells, P the projection (P = C without one).
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class Step(NamedTuple):
    """One forward step: what the next step reads (``h``, ``c``) and what the backward reads."""

    acts: torch.Tensor
    """(..., 4C) float32: [sigmoid(i), tanh(j), sigmoid(f + forget_bias), sigmoid(o)]."""
    c_pre: torch.Tensor
    """(..., C) the cells before the clip (``c`` itself without one)."""
    c: torch.Tensor
    """(..., C) the cells after the clip, float32."""
    tanh_c: torch.Tensor
    hidden: torch.Tensor | None
    """(..., C) sigmoid(o) tanh(c): the projection's input, in the GEMM dtype; float32 without a projection."""
    p_pre: torch.Tensor | None
    """(..., P) the projection before its clip; None without a projection or without the clip."""
    h: torch.Tensor
    """(..., P) the output, in the GEMM dtype (the next step's GEMM operand)."""


def tanh_by_sigmoid(x: torch.Tensor) -> torch.Tensor:
    """tanh(x) = 2 sigmoid(2x) - 1, as a new tensor."""
    return torch.mul(x, 2.0).sigmoid_().mul_(2.0).sub_(1.0)


def fold_forget_bias(x_gates: torch.Tensor, forget_bias: float) -> None:
    """Adds the forget offset to f's input half (..., 4C) in place: once for all steps, where each step would then
    pass ``forget_bias=None`` to :func:`cell_forward`."""
    cells = x_gates.shape[-1] // 4
    x_gates[..., 2 * cells : 3 * cells] += forget_bias


def cell_forward(gates: torch.Tensor, c: torch.Tensor, forget_bias: float | None, cell_clip: float | None,
                 exact_tanh: bool = False, in_place: bool = False) -> tuple[torch.Tensor, ...]:
    """The cell's elementwise step: gates (..., 4C) float32 pre-activations, handed over (they become the
    activations), c (..., C) the previous cells -> (acts, c_pre, c, tanh(c), sigmoid(o) tanh(c)).
    ``forget_bias`` None: already in f's pre-activations (:func:`fold_forget_bias`). ``in_place`` (inference,
    nothing kept for a backward): c becomes the new cells, and the returned tensors share memory with gates and c."""
    cells = gates.shape[-1] // 4
    i, j, f, o = gates.split(cells, dim=-1)
    if forget_bias is not None:
        f.add_(forget_bias)
    if exact_tanh:
        i.sigmoid_()
        j.tanh_()
        f.sigmoid_()
        o.sigmoid_()
    else:  # tanh(j) = 2 sigmoid(2j) - 1
        j.mul_(2.0)
        gates.sigmoid_()
        j.mul_(2.0).sub_(1.0)
    c_pre = torch.mul(f, c, out=c if in_place else None).addcmul_(i, j)
    c = c_pre if cell_clip is None else torch.clamp(c_pre, -cell_clip, cell_clip, out=c_pre if in_place else None)
    if in_place:  # j is spent: tanh(c) goes into its slot and the output into o's, no allocation
        tanh_c = torch.tanh(c, out=j) if exact_tanh else j.copy_(tanh_by_sigmoid(c))
        return gates, c_pre, c, tanh_c, o.mul_(tanh_c)
    tanh_c = torch.tanh(c) if exact_tanh else tanh_by_sigmoid(c)
    return gates, c_pre, c, tanh_c, torch.mul(o, tanh_c)


def project(hidden: torch.Tensor, w_proj_t: torch.Tensor, proj_clip: float | None,
            out: torch.Tensor | None = None) -> tuple[torch.Tensor | None, torch.Tensor]:
    """hidden (..., C) x w_proj_t (..., C, P), in the GEMM dtype -> (before the clip, after it); the first is None
    without a clip, or with ``out``: the output's buffer, clipped in place (inference)."""
    p_pre = torch.matmul(hidden, w_proj_t, out=out)
    if proj_clip is None:
        return None, p_pre
    return None if out is not None else p_pre, torch.clamp(p_pre, -proj_clip, proj_clip, out=out)


def step_forward(x_t: torch.Tensor, h: torch.Tensor, c: torch.Tensor, w_state_t: torch.Tensor,
                 w_proj_t: torch.Tensor | None, forget_bias: float, cell_clip: float | None, proj_clip: float | None,
                 exact_tanh: bool = False) -> Step:
    """One step of the training paths: x_t (..., 4C) the input half of the gates (float32 or the GEMM dtype),
    h (..., P), c (..., C) float32, the weights transposed ((..., P, 4C), (..., C, P)) in the GEMM dtype."""
    mm = w_state_t.dtype
    gates = x_t + torch.matmul(h.to(mm), w_state_t).to(c.dtype)  # (..., 4C), summed in float32
    acts, c_pre, c, tanh_c, hidden = cell_forward(gates, c, forget_bias, cell_clip, exact_tanh)
    if w_proj_t is None:
        return Step(acts, c_pre, c, tanh_c, hidden, None, hidden.to(mm))
    hidden = hidden.to(mm)
    p_pre, h = project(hidden, w_proj_t, proj_clip)
    return Step(acts, c_pre, c, tanh_c, hidden, p_pre, h)


def cell_backward(d_hidden: torch.Tensor, d_c: torch.Tensor, acts: torch.Tensor, c_prev: torch.Tensor,
                  c_pre: torch.Tensor, c: torch.Tensor, tanh_c: torch.Tensor,
                  cell_clip: float | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Backward of :func:`cell_forward`: d_hidden (..., C) the gradient of sigmoid(o) tanh(c), d_c (..., C) the one
    carried into c_t from step t + 1 -> (gradient of the pre-activations (..., 4C), of c_{t-1})."""
    i, j, f, o = acts.split(acts.shape[-1] // 4, dim=-1)
    d_c = d_c + d_hidden * o * (1 - tanh_c * tanh_c)
    if cell_clip is not None:
        d_c = d_c * (c == c_pre)
    d_gates = torch.cat([d_c * j * i * (1 - i), d_c * i * (1 - j * j), d_c * c_prev * f * (1 - f),
                         d_hidden * tanh_c * o * (1 - o)], dim=-1)
    return d_gates, d_c * f


def step_backward(d_h: torch.Tensor, d_c: torch.Tensor, step: Step, c_prev: torch.Tensor, w_state: torch.Tensor,
                  w_proj: torch.Tensor | None,
                  cell_clip: float | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Backward of :func:`step_forward` (``step.hidden`` unused): d_h (..., P) and d_c (..., C) reaching the step's
    outputs, float32; the weights untransposed ((..., 4C, P), (..., P, C)) in the GEMM dtype -> (d_gates (..., 4C),
    d_h_{t-1} (..., P), d_c_{t-1} (..., C) float32, d_p_pre (..., P) or None), the first two and the last in the
    GEMM dtype. The weights' gradients are the caller's: one GEMM over every step it saved."""
    mm = w_state.dtype
    d_hidden, d_pre = d_h, None
    if w_proj is not None:
        d_pre = (d_h if step.p_pre is None else d_h * (step.h == step.p_pre)).to(mm)
        d_hidden = torch.matmul(d_pre, w_proj).to(d_c.dtype)
    d_gates, d_c = cell_backward(d_hidden, d_c, step.acts, c_prev, step.c_pre, step.c, step.tanh_c, cell_clip)
    d_gates = d_gates.to(mm)
    return d_gates, torch.matmul(d_gates, w_state), d_c, d_pre


class LstmStep(torch.autograd.Function):
    """One step as one autograd node with the backward above (masked batches step one at a time):
    (x_t (B, 4C), h (B, P), c (B, C), w_state_t (P, 4C), w_proj_t (C, P) or None) -> (h_t, c_t), exact tanh."""

    @staticmethod
    def forward(ctx, x_t, h, c, w_state_t, w_proj_t, forget_bias, cell_clip, proj_clip):
        step = step_forward(x_t, h, c, w_state_t, w_proj_t, forget_bias, cell_clip, proj_clip, exact_tanh=True)
        ctx.cell_clip = cell_clip
        ctx.has_p_pre = step.p_pre is not None
        ctx.x_dtype = x_t.dtype
        p_pre = () if step.p_pre is None else (step.p_pre,)
        ctx.save_for_backward(h.to(w_state_t.dtype), c, w_state_t, w_proj_t, step.acts, step.c_pre, step.c,
                              step.tanh_c, step.hidden, step.h, *p_pre)
        return step.h, step.c

    @staticmethod
    def backward(ctx, d_h, d_c):
        h_prev, c_prev, w_state_t, w_proj_t, acts, c_pre, c, tanh_c, hidden, h, *p_pre = ctx.saved_tensors
        step = Step(acts, c_pre, c, tanh_c, hidden, p_pre[0] if ctx.has_p_pre else None, h)
        w_proj = None if w_proj_t is None else w_proj_t.t()
        d_gates, d_h_prev, d_c_prev, d_pre = step_backward(d_h.to(c.dtype), d_c, step, c_prev, w_state_t.t(), w_proj,
                                                           ctx.cell_clip)
        d_w_state_t = h_prev.t() @ d_gates  # (P, 4C)
        d_w_proj_t = None if w_proj_t is None else hidden.t() @ d_pre  # (C, P)
        return d_gates.to(ctx.x_dtype), d_h_prev, d_c_prev, d_w_state_t, d_w_proj_t, None, None, None
