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
(``clamp(x) == x``), and the per-step views made once per window. With ``compiled=True`` (``compile`` in
training) both loops run as pure functions (:func:`forward_steps`, :func:`backward_steps`) through
``torch.compile``, which fuses each step's elementwise work into one kernel: the same arithmetic, fewer passes,
none of the per-op overhead.

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

from elmo.modules.compiled import compile_available, run_compiled

_WHAT = "the LSTM step loops"  # for the warning when compiling fails
_sigmoid_backward = torch.ops.aten.sigmoid_backward  # (grad, y) -> grad * y * (1 - y), one pass
_tanh_backward = torch.ops.aten.tanh_backward  # (grad, y) -> grad * (1 - y * y)


def _tanh(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """tanh(x) into ``out`` as 2 sigmoid(2x) - 1: four passes, together faster than PyTorch's CPU tanh."""
    return torch.mul(x, 2.0, out=out).sigmoid_().mul_(2.0).sub_(1.0)


class LstmWindow(torch.autograd.Function):
    """(x_gates (G, T, B, 4C), h0 (G, B, P), c0 (G, B, C), W_state (G, 4C, P), W_proj (G, P, C) or None)
    -> (outputs (G, T, B, P), h_T (G, B, P), c_T (G, B, C)). ``compiled``: the step loops through
    ``torch.compile`` (:func:`forward_steps`, :func:`backward_steps`), else the eager loops below."""

    @staticmethod
    def forward(ctx, x_gates, h0, c0, w_state, w_proj, forget_bias, cell_clip, proj_clip, matmul_dtype=None,
                compiled=False):
        ctx.clips = cell_clip, proj_clip
        ctx.dtypes = x_gates.dtype, w_state.dtype
        mm = matmul_dtype if matmul_dtype is not None else c0.dtype
        w_state_mm, w_proj_mm = w_state.to(mm), None if w_proj is None else w_proj.to(mm)
        saved = None
        if compiled and compile_available():
            saved = run_compiled(forward_steps, _WHAT, x_gates, h0, c0, w_state_mm, w_proj_mm, forget_bias,
                                 cell_clip, proj_clip)
        ctx.compiled = saved is not None
        if saved is not None:
            acts, c_seq, c_pre, tanh_c, h_seq, p_pre, hidden = saved
            _save(ctx, (acts, c_seq, c_pre, tanh_c), h_seq, p_pre, w_state_mm, w_proj_mm,
                  hidden if w_proj is not None else None)
            outputs = h_seq[:, 1:].to(c0.dtype, copy=True) if w_proj is not None else hidden
            return outputs, outputs[:, -1].clone(), c_seq[-1].clone()
        groups, time, batch, four_c = x_gates.shape
        cells, acc = four_c // 4, c0.dtype
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
        _save(ctx, (gates_t, c_t, c_pre_t, tanh_t), h_seq, p_pre, w_state_mm, w_proj_mm,
              hidden if w_proj is not None else None)
        outputs = h_seq[:, 1:].to(acc, copy=True) if w_proj is not None else hidden.clone()
        return outputs, outputs[:, -1].clone(), c_seq[:, time].clone()

    @staticmethod
    def backward(ctx, d_outputs, d_h_last, d_c_last):
        (acts, c_seq, c_pre, tanh_c), (h_seq, p_pre, w_state, w_proj, hidden) = _saved(ctx)
        cell_clip, proj_clip = ctx.clips
        time, (groups, batch, four_c) = len(acts), acts[0].shape
        cells, acc = four_c // 4, acts[0].dtype
        if ctx.compiled and compile_available():
            result = run_compiled(backward_steps, _WHAT, acts, c_seq, c_pre, tanh_c, h_seq, p_pre, w_state, w_proj,
                                   cell_clip, proj_clip, d_outputs, d_h_last, d_c_last)
            if result is not None:
                return _weight_gradients(ctx, *result, h_seq, hidden, w_proj)
        # d_gates (G, T, B, 4C): gradient of the pre-activations, computed in float32 and stored in the GEMM dtype
        # (h_seq's; the GEMMs are its only readers)
        d_gates = h_seq.new_empty(groups, time, batch, four_c)
        # gradient of the projection's output before its clip
        d_proj_in = None if w_proj is None else h_seq.new_empty(groups, time, batch, h_seq.shape[-1])
        d_h = d_h_last.clone() if d_h_last is not None else c_seq[0].new_zeros(groups, batch, h_seq.shape[-1])
        d_c = d_c_last.clone() if d_c_last is not None else c_seq[0].new_zeros(groups, batch, cells)
        if d_outputs is not None:
            d_h += d_outputs[:, time - 1]
        g = acts[0].new_empty(groups, batch, four_c)  # one step's gate gradients in float32, then one cast
        g_i, g_j, g_f, g_o = g.split(cells, dim=2)
        g_fo = g[..., 2 * cells :]
        d_tanh_c = c_seq[0].new_empty(groups, batch, cells)
        fo_t = [gates[..., 2 * cells :] for gates in acts]
        h_t, d_gates_t = h_seq.unbind(1), d_gates.unbind(1)
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
            i, j, f, o = acts[t].split(cells, dim=2)
            torch.mul(d_hidden, tanh_c[t], out=g_o)
            # through tanh(c_t) and the clip of c_t, plus the gradient carried from step t + 1
            _tanh_backward.grad_input(torch.mul(d_hidden, o, out=d_tanh_c), tanh_c[t], grad_input=d_tanh_c)
            d_c += d_tanh_c
            if cell_clip is not None:
                d_c.mul_(c_seq[t + 1] == c_pre[t])
            torch.mul(d_c, j, out=g_i)
            torch.mul(d_c, i, out=g_j)
            torch.mul(d_c, c_seq[t], out=g_f)
            _sigmoid_backward.grad_input(g_i, i, grad_input=g_i)
            _tanh_backward.grad_input(g_j, j, grad_input=g_j)
            _sigmoid_backward.grad_input(g_fo, fo_t[t], grad_input=g_fo)
            d_gates_t[t].copy_(g)
            d_c.mul_(f)
            d_h = torch.bmm(d_gates_t[t], w_state)  # (G, B, P): into h_{t-1}
            d_h = d_h.to(acc) if d_outputs is None or t == 0 else torch.add(d_outputs[:, t - 1], d_h)
        return _weight_gradients(ctx, d_gates, d_h, d_c, d_proj_in, h_seq, hidden, w_proj)


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


def _weight_gradients(ctx, d_gates, d_h, d_c, d_proj_in, h_seq, hidden, w_proj):
    """LstmWindow.backward's return: both weight gradients as one GEMM each over all T steps."""
    x_dtype, w_dtype = ctx.dtypes
    groups, time, batch, four_c = d_gates.shape
    rows = time * batch
    d_w_state = torch.bmm(d_gates.view(groups, rows, four_c).transpose(1, 2),
                          h_seq[:, :time].reshape(groups, rows, -1)).to(w_dtype)  # (G, 4C, P), all steps
    d_w_proj = None
    if w_proj is not None:
        d_w_proj = torch.bmm(d_proj_in.view(groups, rows, -1).transpose(1, 2),
                             hidden.reshape(groups, rows, -1)).to(w_dtype)  # (G, P, C)
    return d_gates.to(x_dtype), d_h, d_c, d_w_state, d_w_proj, None, None, None, None, None


# The step loops as pure functions, for ``torch.compile`` (``compiled=True``; :mod:`elmo.modules.compiled`). They save
# and read the same tensors as the eager loops above (so either backward can follow either forward: the fallback
# relies on it) and compute the same arithmetic, up to float rounding.

def forward_steps(x_gates, h0, c0, w_state, w_proj, forget_bias, cell_clip, proj_clip):
    """(x_gates (G, T, B, 4C), h0, c0, w_state (G, 4C, P), w_proj (G, P, C) or None, in the GEMM dtype) ->
    (acts, c_seq, c_pre, tanh_c, h_seq, p_pre, hidden) as :class:`LstmWindow` saves them: the first four as lists of
    per-step (G, B, .) tensors (T + 1 cells c_0 .. c_T, T of the others); ``hidden`` (G, T, B, C) is o * tanh(c), in
    the GEMM dtype with a projection, else in float32 (then it is the output)."""
    acc, mm = c0.dtype, w_state.dtype
    time, cells = x_gates.shape[1], x_gates.shape[-1] // 4
    x = x_gates.to(acc)
    # the step GEMMs read their weights contiguous (G, in, out), as in the eager loop: faster than transposed views
    w_state_t = w_state.transpose(1, 2).contiguous()  # (G, P, 4C)
    w_proj_t = None if w_proj is None else w_proj.transpose(1, 2).contiguous()  # (G, C, P)
    h, c = h0.to(mm), c0
    acts, c_pres, tanhs, hiddens, p_pres, cs, hs = [], [], [], [], [], [c0], [h]
    for t in range(time):
        i, j, f, o = (x[:, t] + torch.bmm(h, w_state_t).to(acc)).split(cells, dim=2)  # (G, B, C) each
        i, j, f, o = torch.sigmoid(i), _tanh_by_sigmoid(j), torch.sigmoid(f + forget_bias), torch.sigmoid(o)
        c_pre = f * c + i * j
        c = c_pre if cell_clip is None else c_pre.clamp(-cell_clip, cell_clip)
        tanh_c = _tanh_by_sigmoid(c)
        hidden = o * tanh_c
        if w_proj is None:
            h = hidden.to(mm)
        else:
            hidden = hidden.to(mm)
            p_pre = torch.bmm(hidden, w_proj_t)  # (G, B, P)
            p_pres.append(p_pre)
            h = p_pre if proj_clip is None else p_pre.clamp(-proj_clip, proj_clip)
        acts.append(torch.cat([i, j, f, o], dim=2))
        for saved, value in ((c_pres, c_pre), (cs, c), (tanhs, tanh_c), (hiddens, hidden), (hs, h)):
            saved.append(value)
    p_pre = torch.stack(p_pres, dim=1) if w_proj is not None and proj_clip is not None else None
    return (acts, cs, cs[1:] if cell_clip is None else c_pres, tanhs, torch.stack(hs, dim=1), p_pre,
            torch.stack(hiddens, dim=1))


def _tanh_by_sigmoid(x: torch.Tensor) -> torch.Tensor:
    """tanh(x) = 2 sigmoid(2x) - 1, for :func:`forward_steps`: compiled, exp-based sigmoid is cheaper than tanh."""
    return 2.0 * torch.sigmoid(2.0 * x) - 1.0


def backward_steps(acts, c_seq, c_pre, tanh_c, h_seq, p_pre, w_state, w_proj, cell_clip, proj_clip, d_outputs,
                   d_h_last, d_c_last):
    """LstmWindow's backward loop as a pure function (acts, c_seq, c_pre, tanh_c: per-step lists, as
    :func:`forward_steps` returns them): (d_gates (G, T, B, 4C) in the GEMM dtype, d_h0, d_c0, d_proj_in
    (G, T, B, P) in the GEMM dtype or None)."""
    acc, mm = acts[0].dtype, h_seq.dtype
    time, (groups, batch, four_c) = len(acts), acts[0].shape
    cells = four_c // 4
    d_h = d_h_last if d_h_last is not None else acts[0].new_zeros(groups, batch, h_seq.shape[-1])
    d_c = d_c_last if d_c_last is not None else acts[0].new_zeros(groups, batch, cells)
    if d_outputs is not None:
        d_h = d_h + d_outputs[:, time - 1]
    d_gates, d_pres = [], []
    for t in range(time - 1, -1, -1):
        d_hidden = d_h  # (G, B, C)
        if w_proj is not None:
            d_pre = (d_h if p_pre is None else d_h * (h_seq[:, t + 1] == p_pre[:, t])).to(mm)
            d_pres.append(d_pre)
            d_hidden = torch.bmm(d_pre, w_proj).to(acc)
        i, j, f, o = acts[t].split(cells, dim=2)
        tanh = tanh_c[t]
        d_c = d_c + d_hidden * o * (1 - tanh * tanh)
        if cell_clip is not None:  # the clip passed the gradient where it left the value unchanged
            d_c = d_c * (c_seq[t + 1] == c_pre[t])
        g = torch.cat([d_c * j * i * (1 - i), d_c * i * (1 - j * j), d_c * c_seq[t] * f * (1 - f),
                       d_hidden * tanh * o * (1 - o)], dim=2).to(mm)
        d_gates.append(g)
        d_c = d_c * f
        d_h = torch.bmm(g, w_state)  # (G, B, P): into h_{t-1}
        d_h = d_h.to(acc) if d_outputs is None or t == 0 else d_outputs[:, t - 1] + d_h
    d_proj_in = torch.stack(d_pres[::-1], dim=1) if d_pres else None
    return torch.stack(d_gates[::-1], dim=1), d_h, d_c, d_proj_in
