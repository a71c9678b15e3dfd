"""Training path of :class:`~elmo.modules.lstm.LstmCellWithProjection`: one autograd node per layer and window.

Autograd records about a dozen nodes per time step and, going backward, computes the weight gradients of the
recurrent and projection matrices once per step (2 x T small GEMMs plus T accumulations into ``.grad``). Here
the forward loop runs without recording, keeps the activations backpropagation needs, and the backward loop
(backpropagation through time, written out) does one GEMM per step for the recurrence and one for the
projection; both weight gradients are then one large GEMM each over all T steps.

With ``matmul_dtype=torch.bfloat16`` (bf16 autocast) the GEMMs read bfloat16 copies of their operands (the
weights cast once per window), while the gate math, the memory cells, the outputs and the weight and state
gradients stay float32: low precision where it pays (the matrix units), full precision where errors would add up
over time steps. The gradient of ``x_gates`` comes back in its own dtype (bf16 under autocast, for the bf16 GEMMs
of the input projection's backward).

Shapes: T steps, B rows, C cells, P projection (the output; P = C when there is no projection).
Gate pre-activations in TF order ``i, j, f, o``; ``f`` gets the constant forget offset; clipping of the cell and
of the projected output passes gradients only where the value was inside the clip range (as ``clamp`` does).
"""

from __future__ import annotations

import torch


class LstmWindow(torch.autograd.Function):
    """(x_gates, h0, c0, W_state, W_proj) -> (outputs (T, B, P), h_T (B, P), c_T (B, C))."""

    @staticmethod
    def forward(ctx, x_gates, h0, c0, w_state, w_proj, forget_bias, cell_clip, proj_clip, matmul_dtype=None):
        # x_gates (T, B, 4C): input half of the gates with bias; w_state (4C, P); w_proj (P, C) or None.
        time, batch, four_c = x_gates.shape
        cells = four_c // 4
        low = matmul_dtype is not None and matmul_dtype != c0.dtype
        w_state_mm = w_state.to(matmul_dtype) if low else w_state
        w_proj_mm = w_proj.to(matmul_dtype) if low and w_proj is not None else w_proj
        acts = x_gates.new_empty(x_gates.shape, dtype=c0.dtype)  # (T, B, 4C): sigmoid(i, j->tanh, f+1, o)
        c_all = acts.new_empty(time + 1, batch, cells)  # (T+1, B, C): c_0 .. c_T after clipping
        tanh_c = acts.new_empty(time, batch, cells)
        h_all = acts.new_empty(time + 1, batch, h0.shape[1])  # (T+1, B, P): h_0 .. h_T
        cell_ok = torch.ones(time, batch, cells, dtype=torch.bool, device=x_gates.device)
        proj_ok = torch.ones(time, batch, h0.shape[1], dtype=torch.bool, device=x_gates.device)
        c_all[0] = c0
        h_all[0] = h0
        w_state_t = w_state_mm.t()
        for t in range(time):
            if low:  # the recurrent GEMM in matmul_dtype, the sum with the input half in float32
                gates = acts[t].copy_(x_gates[t]).add_(h_all[t].to(matmul_dtype) @ w_state_t)  # (B, 4C)
            else:
                gates = torch.addmm(x_gates[t], h_all[t], w_state_t, out=acts[t])  # (B, 4C)
            i, j, f, o = gates.split(cells, dim=1)
            i.sigmoid_()
            j.tanh_()
            f.add_(forget_bias).sigmoid_()
            o.sigmoid_()
            c = torch.addcmul(f * c_all[t], i, j)  # (B, C)
            if cell_clip is not None:
                torch.le(c.abs(), cell_clip, out=cell_ok[t])
                c.clamp_(-cell_clip, cell_clip)
            c_all[t + 1] = c
            torch.tanh(c, out=tanh_c[t])
            hidden = o * tanh_c[t]  # (B, C)
            h = h_all[t + 1]
            if w_proj is None:
                h.copy_(hidden)
            elif low:
                h.copy_(hidden.to(matmul_dtype) @ w_proj_mm.t())  # (B, P)
            else:
                torch.mm(hidden, w_proj.t(), out=h)  # (B, P)
            if proj_clip is not None:
                torch.le(h.abs(), proj_clip, out=proj_ok[t])
                h.clamp_(-proj_clip, proj_clip)
        ctx.save_for_backward(acts, c_all, tanh_c, h_all, cell_ok, proj_ok, w_state_mm, w_proj_mm)
        ctx.matmul_dtype = matmul_dtype if low else None
        ctx.x_dtype = x_gates.dtype
        outputs = h_all[1:]
        return outputs, h_all[time].clone(), c_all[time].clone()

    @staticmethod
    def backward(ctx, d_outputs, d_h_last, d_c_last):
        acts, c_all, tanh_c, h_all, cell_ok, proj_ok, w_state, w_proj = ctx.saved_tensors
        dtype = ctx.matmul_dtype

        def mm(a, b):  # float32 result; bf16 operands when the forward ran its GEMMs in bf16
            return a @ b if dtype is None else (a.to(dtype) @ b.to(dtype)).float()

        time, batch, four_c = acts.shape
        cells = four_c // 4
        # d_gates (T, B, 4C): gradient of the pre-activations, in the dtype the GEMMs read; step by step it is
        # computed in float32 (in place in d_gates, or in one reused buffer when the GEMMs read bf16)
        d_gates = acts.new_empty(acts.shape, dtype=dtype or acts.dtype)
        step_grad = acts.new_empty(batch, four_c) if dtype is not None else None
        d_proj_in = h_all.new_empty(time, batch, h_all.shape[2])  # (T, B, P), gradient of h before clipping
        d_h = d_h_last.clone() if d_h_last is not None else h_all.new_zeros(batch, h_all.shape[2])
        d_c = d_c_last.clone() if d_c_last is not None else c_all.new_zeros(batch, cells)
        d_outputs = d_outputs if d_outputs is not None else torch.zeros_like(h_all[1:])
        for t in range(time - 1, -1, -1):
            d_h += d_outputs[t]
            d_pre = torch.mul(d_h, proj_ok[t], out=d_proj_in[t])  # (B, P)
            d_hidden = mm(d_pre, w_proj) if w_proj is not None else d_pre  # (B, C)
            i, j, f, o = acts[t].split(cells, dim=1)
            grad_t = d_gates[t] if step_grad is None else step_grad  # (B, 4C) float32
            d_i, d_j, d_f, d_o = grad_t.split(cells, dim=1)
            torch.mul(d_hidden, tanh_c[t], out=d_o).mul_(o * (1 - o))
            # through tanh(c_t) and the clip of c_t, plus the gradient carried from step t + 1
            d_c.addcmul_(d_hidden * o, 1 - tanh_c[t] * tanh_c[t]).mul_(cell_ok[t])
            torch.mul(d_c, j, out=d_i).mul_(i * (1 - i))
            torch.mul(d_c, i, out=d_j).mul_(1 - j * j)
            torch.mul(d_c, c_all[t], out=d_f).mul_(f * (1 - f))
            d_c.mul_(f)
            if step_grad is not None:
                d_gates[t].copy_(step_grad)
            d_h = mm(d_gates[t], w_state)  # (B, P): into h_{t-1}
        flat_gates = d_gates.reshape(time * batch, four_c)
        d_w_state = mm(flat_gates.t(), h_all[:time].reshape(time * batch, -1))  # (4C, P), all steps in one GEMM
        d_w_proj = None
        if w_proj is not None:
            hidden = acts[..., 3 * cells :] * tanh_c  # (T, B, C): sigmoid(o) * tanh(c), recomputed
            d_w_proj = mm(d_proj_in.reshape(time * batch, -1).t(), hidden.reshape(time * batch, cells))  # (P, C)
        return d_gates.to(ctx.x_dtype), d_h, d_c, d_w_state, d_w_proj, None, None, None, None
