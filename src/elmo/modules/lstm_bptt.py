"""Training path of :class:`~elmo.modules.lstm.LstmCellWithProjection`: one autograd node per layer and window.

Autograd records about a dozen nodes per time step and, going backward, computes the weight gradients of the
recurrent and projection matrices once per step (2 x T small GEMMs plus T accumulations into ``.grad``). Here
the forward loop runs without recording, keeps the activations backpropagation needs, and the backward loop
(backpropagation through time, written out) does one GEMM per step for the recurrence and one for the
projection; both weight gradients are then one large GEMM each over all T steps.

The window runs G independent layers of one shape in lockstep (the biLM's forward and backward layers: G = 2):
each step is one batched GEMM and one set of elementwise ops for all G, so the per-op overhead, a large share
at B = 32 rows on a CPU, is paid once instead of G times.

With ``matmul_dtype=torch.bfloat16`` (bf16 autocast) the GEMMs read bfloat16 copies of their operands (the
weights cast once per window), while the gate math, the memory cells, the outputs and the weight and state
gradients stay float32: low precision where it pays (the matrix units), full precision where errors would add up
over time steps. The projected outputs are exact in bfloat16 (they come out of a bf16 GEMM), so they are kept in
that dtype for the next step's GEMM. The gradient of ``x_gates`` comes back in its own dtype (bf16 under
autocast, for the bf16 GEMMs of the input projection's backward).

Shapes: G layers, T steps, B rows, C cells, P projection (the output; P = C when there is no projection).
Gate pre-activations in TF order ``i, j, f, o``; ``f`` gets the constant forget offset; clipping of the cell and
of the projected output passes gradients only where the value was inside the clip range (as ``clamp`` does).
"""

from __future__ import annotations

import torch

_sigmoid_backward = torch.ops.aten.sigmoid_backward  # (grad, y) -> grad * y * (1 - y), one pass
_tanh_backward = torch.ops.aten.tanh_backward  # (grad, y) -> grad * (1 - y * y)


class LstmWindow(torch.autograd.Function):
    """(x_gates (G, T, B, 4C), h0 (G, B, P), c0 (G, B, C), W_state (G, 4C, P), W_proj (G, P, C) or None)
    -> (outputs (G, T, B, P), h_T (G, B, P), c_T (G, B, C))."""

    @staticmethod
    def forward(ctx, x_gates, h0, c0, w_state, w_proj, forget_bias, cell_clip, proj_clip, matmul_dtype=None):
        groups, time, batch, four_c = x_gates.shape
        cells, acc = four_c // 4, c0.dtype
        mm = matmul_dtype if matmul_dtype is not None else acc  # the GEMM operand dtype
        w_state_mm, w_proj_mm = w_state.to(mm), None if w_proj is None else w_proj.to(mm)
        w_state_t = w_state_mm.transpose(1, 2)  # (G, P, 4C)
        acts = x_gates.to(acc, copy=True)  # (G, T, B, 4C): pre-activations, turned into activations step by step
        acts[..., 2 * cells : 3 * cells] += forget_bias
        c_seq = acts.new_empty(groups, time + 1, batch, cells)  # c_0 .. c_T, after the clip
        c_pre = acts.new_empty(groups, time, batch, cells) if cell_clip is not None else c_seq[:, 1:]
        tanh_c = acts.new_empty(groups, time, batch, cells)
        h_seq = acts.new_empty(groups, time + 1, batch, h0.shape[-1], dtype=mm)  # h_0 .. h_T, GEMM operands
        c_seq[:, 0] = c0
        h_seq[:, 0] = h0
        if w_proj is None:
            out_seq = h_seq[:, 1:] if mm == acc else acts.new_empty(groups, time, batch, cells)
            p_pre = None
        else:
            hidden = acts.new_empty(groups, batch, cells, dtype=mm)  # o * tanh(c), one step
            p_pre = acts.new_empty(groups, time, batch, h0.shape[-1], dtype=mm) if proj_clip is not None else None
        for t in range(time):
            gates = acts[:, t]  # (G, B, 4C)
            if mm == acc:
                gates.baddbmm_(h_seq[:, t], w_state_t)
            else:  # the recurrent GEMM in bf16, its sum with the input half in float32
                gates += torch.bmm(h_seq[:, t], w_state_t)
            i, j, f, o = gates.split(cells, dim=2)
            i.sigmoid_()
            j.tanh_()
            gates[..., 2 * cells :].sigmoid_()  # f and o
            c = torch.mul(f, c_seq[:, t], out=c_pre[:, t]).addcmul_(i, j)  # (G, B, C)
            if cell_clip is not None:
                torch.clamp(c, -cell_clip, cell_clip, out=c_seq[:, t + 1])
            torch.tanh(c_seq[:, t + 1], out=tanh_c[:, t])
            if w_proj is None:
                torch.mul(o, tanh_c[:, t], out=out_seq[:, t])
                if mm != acc:
                    h_seq[:, t + 1] = out_seq[:, t]
            elif p_pre is None:
                torch.bmm(torch.mul(o, tanh_c[:, t], out=hidden), w_proj_mm.transpose(1, 2), out=h_seq[:, t + 1])
            else:
                torch.bmm(torch.mul(o, tanh_c[:, t], out=hidden), w_proj_mm.transpose(1, 2), out=p_pre[:, t])
                torch.clamp(p_pre[:, t], -proj_clip, proj_clip, out=h_seq[:, t + 1])
        ctx.save_for_backward(acts, c_seq, c_pre, tanh_c, h_seq, p_pre, w_state_mm, w_proj_mm)
        ctx.clips = cell_clip, proj_clip
        ctx.x_dtype = x_gates.dtype
        outputs = h_seq[:, 1:].to(acc, copy=True) if w_proj is not None else out_seq.clone()
        return outputs, outputs[:, -1].clone(), c_seq[:, time].clone()

    @staticmethod
    def backward(ctx, d_outputs, d_h_last, d_c_last):
        acts, c_seq, c_pre, tanh_c, h_seq, p_pre, w_state, w_proj = ctx.saved_tensors
        cell_clip, proj_clip = ctx.clips
        groups, time, batch, four_c = acts.shape
        cells, acc, mm = four_c // 4, acts.dtype, h_seq.dtype
        # d_gates (G, T, B, 4C): gradient of the pre-activations, computed in float32 and stored in the GEMM dtype
        # (the GEMMs are its only readers)
        d_gates = acts.new_empty(acts.shape, dtype=mm)
        # gradient of the projection's output before its clip
        d_proj_in = None if w_proj is None else h_seq.new_empty(groups, time, batch, h_seq.shape[-1])
        d_h = d_h_last.clone() if d_h_last is not None else acts.new_zeros(groups, batch, h_seq.shape[-1])
        d_c = d_c_last.clone() if d_c_last is not None else acts.new_zeros(groups, batch, cells)
        for t in range(time - 1, -1, -1):
            if d_outputs is not None:
                d_h += d_outputs[:, t]
            d_hidden = d_h  # (G, B, C)
            if w_proj is not None:
                d_pre = d_proj_in[:, t]  # (G, B, P)
                if p_pre is not None:
                    torch.mul(d_h, p_pre[:, t].abs() <= proj_clip, out=d_pre)
                else:
                    d_pre.copy_(d_h)
                d_hidden = torch.bmm(d_pre, w_proj)
            i, j, f, o = acts[:, t].split(cells, dim=2)
            d_i, d_j, d_f, d_o = d_gates[:, t].split(cells, dim=2)
            _sigmoid_backward.grad_input(d_hidden * tanh_c[:, t], o, grad_input=d_o)
            # through tanh(c_t) and the clip of c_t, plus the gradient carried from step t + 1
            d_c += _tanh_backward(d_hidden * o, tanh_c[:, t])
            if cell_clip is not None:
                d_c.mul_(c_pre[:, t].abs() <= cell_clip)
            _sigmoid_backward.grad_input(d_c * j, i, grad_input=d_i)
            _tanh_backward.grad_input(d_c * i, j, grad_input=d_j)
            _sigmoid_backward.grad_input(d_c * c_seq[:, t], f, grad_input=d_f)
            d_c.mul_(f)
            d_h = torch.bmm(d_gates[:, t], w_state).to(acc)  # (G, B, P): into h_{t-1}
        rows = time * batch
        d_w_state = torch.bmm(d_gates.view(groups, rows, four_c).transpose(1, 2),
                              h_seq[:, :time].reshape(groups, rows, -1)).to(acc)  # (G, 4C, P), all steps at once
        d_w_proj = None
        if w_proj is not None:
            hidden = torch.mul(acts[..., 3 * cells :], tanh_c, out=tanh_c.new_empty(tanh_c.shape, dtype=mm))
            d_w_proj = torch.bmm(d_proj_in.view(groups, rows, -1).transpose(1, 2),
                                 hidden.view(groups, rows, cells)).to(acc)  # (G, P, C)
        return d_gates.to(ctx.x_dtype), d_h, d_c, d_w_state, d_w_proj, None, None, None, None
