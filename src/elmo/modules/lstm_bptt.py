"""Training path of :class:`~elmo.modules.lstm.LstmCellWithProjection`: one autograd node per layer and window.

Autograd records about a dozen nodes per time step and, going backward, computes the weight gradients of the
recurrent and projection matrices once per step (2 x T small GEMMs plus T accumulations into ``.grad``). Here
the forward loop runs without recording, keeps the activations backpropagation needs, and the backward loop
(backpropagation through time, written out) does one GEMM per step for the recurrence and one for the
projection; both weight gradients are then one large GEMM each over all T steps.

The window runs G independent layers of one shape in lockstep (the biLM's forward and backward layers: G = 2):
each step is one batched GEMM and one set of elementwise ops for all G, so the per-op overhead, a large share
at B = 32 rows on a CPU, is paid once instead of G times.

Per step the elementwise work, not the arithmetic, is what costs on a CPU, so the loops keep passes few: one
sigmoid for all four gates (tanh(x) = 2 sigmoid(2x) - 1, with j's pre-activation doubled up front; PyTorch's CPU
``tanh`` takes five times as long as its ``sigmoid``), the same identity for tanh(c), the step's gate gradients
gathered in one float32 buffer and cast once, the clips' gradient masks read off the saved values
(``clamp(x) == x``), and the per-step views made once per window.

With ``matmul_dtype=torch.bfloat16`` (bf16 autocast) the GEMMs read bfloat16 operands (weights that arrive in
float32 are cast once per window), while the gate math, the memory cells, the outputs and the state gradients stay
float32: low precision where it pays (the matrix units), full precision where errors would add up over time
steps. The projected outputs are exact in bfloat16 (they come out of a bf16 GEMM), so they are kept in that dtype
for the next step's GEMM. The gradients of ``x_gates`` and of the weights come back in their own dtypes (bf16
under autocast, as autograd through bf16 GEMMs would give them).

Shapes: G layers, T steps, B rows, C cells, P projection (the output; P = C when there is no projection).
Gate pre-activations in TF order ``i, j, f, o``; ``f`` gets the constant forget offset; clipping of the cell and
of the projected output passes gradients only where the value was inside the clip range (as ``clamp`` does).
"""

from __future__ import annotations

import torch

_sigmoid_backward = torch.ops.aten.sigmoid_backward  # (grad, y) -> grad * y * (1 - y), one pass
_tanh_backward = torch.ops.aten.tanh_backward  # (grad, y) -> grad * (1 - y * y)


def _tanh(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """tanh(x) into ``out`` as 2 sigmoid(2x) - 1: four passes, together faster than PyTorch's CPU tanh."""
    return torch.mul(x, 2.0, out=out).sigmoid_().mul_(2.0).sub_(1.0)


class LstmWindow(torch.autograd.Function):
    """(x_gates (G, T, B, 4C), h0 (G, B, P), c0 (G, B, C), W_state (G, 4C, P), W_proj (G, P, C) or None)
    -> (outputs (G, T, B, P), h_T (G, B, P), c_T (G, B, C))."""

    @staticmethod
    def forward(ctx, x_gates, h0, c0, w_state, w_proj, forget_bias, cell_clip, proj_clip, matmul_dtype=None):
        groups, time, batch, four_c = x_gates.shape
        cells, acc = four_c // 4, c0.dtype
        mm = matmul_dtype if matmul_dtype is not None else acc  # the GEMM operand dtype
        w_state_mm, w_proj_mm = w_state.to(mm), None if w_proj is None else w_proj.to(mm)
        acts = x_gates.to(acc, copy=True)  # (G, T, B, 4C): pre-activations, turned into activations step by step
        # One sigmoid for all four gates, as tanh(x) = 2 sigmoid(2x) - 1 (PyTorch's CPU tanh takes five times as long
        # as its sigmoid): j's pre-activation is doubled, here and in a copy of its recurrent weights (exact: a power
        # of two); f gets the forget offset. Both in one pass over the j and f columns.
        mid = acts[..., cells : 3 * cells]  # (G, T, B, 2C): j and f
        scale, offset = acts.new_ones(2, cells), acts.new_zeros(2, cells)
        scale[0], offset[1] = 2.0, forget_bias
        torch.addcmul(offset.view(-1), mid, scale.view(-1), out=mid)
        # the forward GEMMs read their weights contiguous (G, in, out): faster than transposed views on CPU
        w_state_t = w_state_mm.transpose(1, 2).contiguous()  # (G, P, 4C)
        w_state_t[..., cells : 2 * cells] *= 2.0
        c_seq = acts.new_empty(groups, time + 1, batch, cells)  # c_0 .. c_T, after the clip
        c_pre = acts.new_empty(groups, time, batch, cells) if cell_clip is not None else c_seq[:, 1:]
        tanh_c = acts.new_empty(groups, time, batch, cells)
        h_seq = acts.new_empty(groups, time + 1, batch, h0.shape[-1], dtype=mm)  # h_0 .. h_T, GEMM operands
        c_seq[:, 0] = c0
        h_seq[:, 0] = h0
        if w_proj is None:
            hidden = h_seq[:, 1:] if mm == acc else acts.new_empty(groups, time, batch, cells)  # the outputs
            p_pre = None
        else:
            hidden = acts.new_empty(groups, time, batch, cells, dtype=mm)  # o * tanh(c): the projection's input
            p_pre = acts.new_empty(groups, time, batch, h0.shape[-1], dtype=mm) if proj_clip is not None else None
        # per-step views, made once (T x (G, B, .)): nothing is sliced inside the loop, which pays for every op
        gates_t, c_t, c_pre_t, tanh_t, h_t, hidden_t = (
            x.unbind(1) for x in (acts, c_seq, c_pre, tanh_c, h_seq, hidden))
        p_pre_t = p_pre.unbind(1) if p_pre is not None else None
        w_proj_t = None if w_proj is None else w_proj_mm.transpose(1, 2).contiguous()  # (G, C, P)
        for t in range(time):
            gates = gates_t[t]  # (G, B, 4C)
            if mm == acc:
                gates.baddbmm_(h_t[t], w_state_t)
            else:  # the recurrent GEMM in bf16, its sum with the input half in float32
                gates += torch.bmm(h_t[t], w_state_t)
            i, j, f, o = gates.sigmoid_().split(cells, dim=2)
            j.mul_(2.0).sub_(1.0)  # tanh of the candidate's pre-activation
            c = torch.mul(f, c_t[t], out=c_pre_t[t]).addcmul_(i, j)  # (G, B, C)
            if cell_clip is not None:
                torch.clamp(c, -cell_clip, cell_clip, out=c_t[t + 1])
            _tanh(c_t[t + 1], out=tanh_t[t])
            torch.mul(o, tanh_t[t], out=hidden_t[t])
            if w_proj is None:
                if mm != acc:
                    h_t[t + 1].copy_(hidden_t[t])
            elif p_pre is None:
                torch.bmm(hidden_t[t], w_proj_t, out=h_t[t + 1])
            else:
                torch.bmm(hidden_t[t], w_proj_t, out=p_pre_t[t])
                torch.clamp(p_pre_t[t], -proj_clip, proj_clip, out=h_t[t + 1])
        ctx.save_for_backward(acts, c_seq, c_pre, tanh_c, h_seq, p_pre, w_state_mm, w_proj_mm,
                              hidden if w_proj is not None else None)
        ctx.clips = cell_clip, proj_clip
        ctx.dtypes = x_gates.dtype, w_state.dtype
        outputs = h_seq[:, 1:].to(acc, copy=True) if w_proj is not None else hidden.clone()
        return outputs, outputs[:, -1].clone(), c_seq[:, time].clone()

    @staticmethod
    def backward(ctx, d_outputs, d_h_last, d_c_last):
        acts, c_seq, c_pre, tanh_c, h_seq, p_pre, w_state, w_proj, hidden = ctx.saved_tensors
        cell_clip, proj_clip = ctx.clips
        x_dtype, w_dtype = ctx.dtypes
        groups, time, batch, four_c = acts.shape
        cells, acc, mm = four_c // 4, acts.dtype, h_seq.dtype
        # d_gates (G, T, B, 4C): gradient of the pre-activations, computed in float32 and stored in the GEMM dtype
        # (the GEMMs are its only readers)
        d_gates = acts.new_empty(acts.shape, dtype=mm)
        # gradient of the projection's output before its clip
        d_proj_in = None if w_proj is None else h_seq.new_empty(groups, time, batch, h_seq.shape[-1])
        d_h = d_h_last.clone() if d_h_last is not None else acts.new_zeros(groups, batch, h_seq.shape[-1])
        d_c = d_c_last.clone() if d_c_last is not None else acts.new_zeros(groups, batch, cells)
        if d_outputs is not None:
            d_h += d_outputs[:, time - 1]
        g = acts.new_empty(groups, batch, four_c)  # one step's gate gradients in float32, then one cast
        g_i, g_j, g_f, g_o = g.split(cells, dim=2)
        g_fo = g[..., 2 * cells :]
        d_tanh_c = acts.new_empty(groups, batch, cells)
        gates_t, fo_t, c_t, c_pre_t, tanh_t, h_t, d_gates_t = (
            x.unbind(1) for x in (acts, acts[..., 2 * cells :], c_seq, c_pre, tanh_c, h_seq, d_gates))
        p_pre_t = p_pre.unbind(1) if p_pre is not None else None
        d_proj_in_t = d_proj_in.unbind(1) if d_proj_in is not None else None
        for t in range(time - 1, -1, -1):
            d_hidden = d_h  # (G, B, C)
            if w_proj is not None:
                d_pre = d_proj_in_t[t]  # (G, B, P)
                if p_pre is not None:  # the clip passed the gradient where it left the value unchanged
                    torch.mul(d_h, h_t[t + 1] == p_pre_t[t], out=d_pre)
                else:
                    d_pre.copy_(d_h)
                d_hidden = torch.bmm(d_pre, w_proj).to(acc)
            i, j, f, o = gates_t[t].split(cells, dim=2)
            torch.mul(d_hidden, tanh_t[t], out=g_o)
            # through tanh(c_t) and the clip of c_t, plus the gradient carried from step t + 1
            _tanh_backward.grad_input(torch.mul(d_hidden, o, out=d_tanh_c), tanh_t[t], grad_input=d_tanh_c)
            d_c += d_tanh_c
            if cell_clip is not None:
                d_c.mul_(c_t[t + 1] == c_pre_t[t])
            torch.mul(d_c, j, out=g_i)
            torch.mul(d_c, i, out=g_j)
            torch.mul(d_c, c_t[t], out=g_f)
            _sigmoid_backward.grad_input(g_i, i, grad_input=g_i)
            _tanh_backward.grad_input(g_j, j, grad_input=g_j)
            _sigmoid_backward.grad_input(g_fo, fo_t[t], grad_input=g_fo)
            d_gates_t[t].copy_(g)
            d_c.mul_(f)
            d_h = torch.bmm(d_gates_t[t], w_state)  # (G, B, P): into h_{t-1}
            d_h = d_h.to(acc) if d_outputs is None or t == 0 else torch.add(d_outputs[:, t - 1], d_h)
        rows = time * batch
        d_w_state = torch.bmm(d_gates.view(groups, rows, four_c).transpose(1, 2),
                              h_seq[:, :time].reshape(groups, rows, -1)).to(w_dtype)  # (G, 4C, P), all steps
        d_w_proj = None
        if w_proj is not None:
            d_w_proj = torch.bmm(d_proj_in.view(groups, rows, -1).transpose(1, 2),
                                 hidden.view(groups, rows, cells)).to(w_dtype)  # (G, P, C)
        return d_gates.to(x_dtype), d_h, d_c, d_w_state, d_w_proj, None, None, None, None
