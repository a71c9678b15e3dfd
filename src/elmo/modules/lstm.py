"""LSTM with a projection and clipping, and a stack of them with optional residual connections.

The cell is TensorFlow's ``LSTMCell(num_units=C, num_proj=P, cell_clip, proj_clip, forget_bias=1.0)`` as used by
bilm-tf. With gate pre-activations in TF's order ``i, j, f, o``::

    c_t = clip(sigmoid(f + 1) * c_{t-1} + sigmoid(i) * tanh(j), cell_clip)
    h_t = clip((sigmoid(o) * tanh(c_t)) W_P, proj_clip)          # W_P only when P < C

The forget-gate offset of 1 is a constant of the cell, not folded into the bias, exactly as in TF: the stored
bias is the file's bias, so weights round-trip bit for bit.

Speed: the input half of the gate GEMM does not depend on the recurrence, so it is computed for all time steps at
once (one large GEMM); each step is then one (B, P) x (P, 4C) GEMM, the elementwise gate math and the projection.
Training windows (no mask) run as one autograd node with a hand-written backward (:mod:`elmo.modules.lstm_bptt`),
and :func:`run_stacks_in_lockstep` runs the biLM's two directions through it together, one batched op for both at
every step. Without autograd (inference), :func:`_run_inference` goes further, as the original's CUDA-free fast
paths do: rows are sorted by length so step t only touches the n_t rows still running (no masking), the forget
offset is added once for all steps, and the gate math runs in place on preallocated buffers. The memory cells stay
float32 even when the weights are bfloat16, so long sentences do not accumulate rounding.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from elmo.modules.autocast import autocast_suspended
from elmo.modules.dropout import sequence_dropout
from elmo.modules.lstm_bptt import LstmWindow
from elmo.modules.threads import gemm_threads, small_ops_on_one_thread

LstmState = tuple[torch.Tensor, torch.Tensor]
"""(h, c): h (..., B, P) the projected output, c (..., B, C) the memory cells."""


class LstmCellWithProjection(nn.Module):
    """One LSTM layer with projection, run over a whole (left-aligned, padded) sequence."""

    def __init__(
        self,
        input_dim: int,
        cell_dim: int,
        projection_dim: int,
        cell_clip: float | None = None,
        proj_clip: float | None = None,
        forget_bias: float = 1.0,
        weight_dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if not 0.0 <= weight_dropout < 1.0:
            raise ValueError(f"weight_dropout must be in [0, 1), got {weight_dropout}")
        self.input_dim = input_dim
        self.cell_dim = cell_dim
        self.output_dim = projection_dim
        self.cell_clip = cell_clip
        self.proj_clip = proj_clip
        self.forget_bias = forget_bias
        self.weight_dropout = weight_dropout
        """DropConnect on the recurrent matrix in training (Wan et al. 2013; AWD-LSTM's WeightDrop, Merity et al.
        2018): one mask per call, shared by every row and time step, so the recurrence itself is regularised, which
        dropout on the layer inputs does not reach. Not in the original trainer; 0 = off."""
        # Gate rows in TF order: i (input), j (candidate), f (forget), o (output).
        self.input_linearity = nn.Linear(input_dim, 4 * cell_dim, bias=True)
        self.state_linearity = nn.Linear(projection_dim, 4 * cell_dim, bias=False)
        self.projection = nn.Linear(cell_dim, projection_dim, bias=False) if projection_dim < cell_dim else None

    def zero_state(self, batch_size: int, like: torch.Tensor) -> LstmState:
        h = like.new_zeros(batch_size, self.output_dim)
        c = like.new_zeros(batch_size, self.cell_dim)
        return h, c

    def forward(
        self, inputs: torch.Tensor, mask: torch.Tensor | None = None, state: LstmState | None = None
    ) -> tuple[torch.Tensor, LstmState]:
        """Run the cell over time.

        Args:
            inputs: (B, T, input_dim).
            mask: (B, T) bool, True for real tokens, padding only at the end of a row. The state stops
                changing after a row's last token, so the returned state is the state after that token.
            state: initial (h (B, P), c (B, C)); zeros when None.

        Returns:
            outputs (B, T, P), zero at padded positions, and the final state (h, c).
        """
        if not torch.is_grad_enabled():
            return self._run_inference(inputs, mask, state)
        if mask is None and inputs.shape[1] > 0:
            return self._run_window(inputs, state)  # training windows: every row runs all T steps
        return self._run_autograd(inputs, mask, state)

    def _run_window(self, inputs: torch.Tensor, state: LstmState | None) -> tuple[torch.Tensor, LstmState]:
        """Unmasked (B, T, in) with gradients: the hand-written BPTT of :class:`LstmWindow`."""
        h, c = state if state is not None else self.zero_state(inputs.shape[0], inputs)
        out, (h, c) = run_windows([self], inputs.transpose(0, 1).unsqueeze(0), (h.unsqueeze(0), c.unsqueeze(0)))
        return out[0].transpose(0, 1), (h[0], c[0])  # (B, T, P)

    def _recurrent_weight(self) -> torch.Tensor:
        """(4C, P) recurrent matrix, with this call's DropConnect mask in training."""
        weight = self.state_linearity.weight
        if not self.training or self.weight_dropout == 0.0:
            return weight
        # from uniform draws: a third of the time of F.dropout's Bernoulli sampling on CPU
        keep = torch.rand_like(weight).ge_(self.weight_dropout).div_(1.0 - self.weight_dropout)  # (4C, P)
        return weight * keep

    def _run_autograd(
        self, inputs: torch.Tensor, mask: torch.Tensor | None, state: LstmState | None
    ) -> tuple[torch.Tensor, LstmState]:
        """Step by step with autograd recording (masked batches)."""
        batch, time, _ = inputs.shape
        h, c = state if state is not None else self.zero_state(batch, inputs)
        x_gates = self.input_linearity(inputs)  # (B, T, 4C): all time steps in one GEMM
        # unbind, not x_gates[:, t]: the same values, but autograd stacks the T step gradients once instead of
        # adding T full-size (B, T, 4C) tensors (quadratic in T during training).
        x_steps = x_gates.unbind(1)  # T x (B, 4C)
        w_state = self._recurrent_weight().t()  # (P, 4C)
        outputs = []
        for t in range(time):
            gates = torch.addmm(x_steps[t], h, w_state)  # (B, 4C)
            i, j, f, o = gates.chunk(4, dim=1)
            c_new = torch.sigmoid(f + self.forget_bias) * c + torch.sigmoid(i) * torch.tanh(j)
            if self.cell_clip is not None:
                c_new = c_new.clamp(-self.cell_clip, self.cell_clip)
            h_new = torch.sigmoid(o) * torch.tanh(c_new)  # (B, C)
            if self.projection is not None:
                h_new = self.projection(h_new)  # (B, P)
                if self.proj_clip is not None:
                    h_new = h_new.clamp(-self.proj_clip, self.proj_clip)
            if mask is None:
                h, c = h_new, c_new
            else:
                keep = mask[:, t : t + 1]  # (B, 1)
                h = torch.where(keep, h_new, h)
                c = torch.where(keep, c_new, c)
            outputs.append(h_new)
        out = torch.stack(outputs, dim=1) if outputs else inputs.new_zeros(batch, 0, self.output_dim)  # (B, T, P)
        if mask is not None:
            out = out * mask.unsqueeze(-1).to(out.dtype)
        return out, (h, c)

    def _run_inference(
        self, inputs: torch.Tensor, mask: torch.Tensor | None, state: LstmState | None
    ) -> tuple[torch.Tensor, LstmState]:
        """Same result as the autograd path, computed with in-place ops on length-sorted rows."""
        batch, time, _ = inputs.shape
        dtype = self.state_linearity.weight.dtype
        lengths = mask.sum(dim=1) if mask is not None else inputs.new_full((batch,), time, dtype=torch.long)
        lengths, order = lengths.sort(descending=True)  # (B,), rows longest first
        steps = torch.arange(time, device=lengths.device).unsqueeze(1)  # (T, 1)
        running = (lengths.unsqueeze(0) > steps).sum(dim=1).tolist()  # running[t] = rows still going at step t
        h0, c0 = state if state is not None else self.zero_state(batch, inputs)
        h0, c = h0[order].to(dtype), c0[order].float()  # (B, P), (B, C); c is ours to update in place
        sorted_inputs = inputs[order].transpose(0, 1).to(dtype)  # (T, B, in)
        with gemm_threads(time * batch * self.input_linearity.weight.numel()):
            x_gates = self.input_linearity(sorted_inputs)  # (T, B, 4C), contiguous per step
        cells = self.cell_dim
        x_gates[..., 2 * cells : 3 * cells] += self.forget_bias  # TF's constant forget offset, once
        w_state = self.state_linearity.weight.t()  # (P, 4C)
        out = inputs.new_zeros(time, batch, self.output_dim, dtype=dtype)  # (T, B, P)
        with small_ops_on_one_thread(inputs.device):
            for t in range(time):
                n = running[t]
                if n == 0:
                    break
                h_prev = h0[:n] if t == 0 else out[t - 1, :n]  # (n, P): rows alive now were alive at t - 1
                with gemm_threads(n * w_state.numel()):
                    gates = torch.addmm(x_gates[t, :n], h_prev, w_state)  # (n, 4C)
                gates = gates.float()  # one cast per step (bf16), instead of one per mixed-dtype op
                self._cell_update(gates, c[:n])
                hidden = torch.tanh(c[:n]).mul_(gates[:, 3 * cells :])  # (n, C)
                if self.projection is None:
                    out[t, :n] = hidden
                    continue
                with gemm_threads(n * self.projection.weight.numel()):
                    torch.mm(hidden.to(dtype), self.projection.weight.t(), out=out[t, :n])  # (n, P)
                if self.proj_clip is not None:
                    out[t, :n].clamp_(-self.proj_clip, self.proj_clip)
        h_final = self._final_outputs(out, lengths, h0)  # (B, P)
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(batch, device=order.device)
        outputs = out.transpose(0, 1)[inverse]  # (B, T, P), padding stays zero
        return outputs, (h_final[inverse].to(h0.dtype), c[inverse].to(c0.dtype))

    def _cell_update(self, gates: torch.Tensor, c: torch.Tensor) -> None:
        """In place: gates (n, 4C) become [sigmoid(i), tanh(j), sigmoid(f+1), sigmoid(o)]; c (n, C) the new cells."""
        cells = self.cell_dim
        i, j, f, o = gates.split(cells, dim=1)  # views, TF order
        i.sigmoid_()
        j.tanh_()
        f.sigmoid_()
        o.sigmoid_()
        c.mul_(f).addcmul_(i, j)
        if self.cell_clip is not None:
            c.clamp_(-self.cell_clip, self.cell_clip)

    @staticmethod
    def _final_outputs(out: torch.Tensor, lengths: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
        """h after each row's last token: out (T, B, P) at step length - 1, or the initial h for empty rows."""
        batch = lengths.shape[0]
        if out.shape[0] == 0:
            return h0
        last = out[(lengths - 1).clamp(min=0), torch.arange(batch, device=out.device)]  # (B, P)
        return torch.where((lengths > 0).unsqueeze(1), last, h0)


def run_windows(
    layers: Sequence[LstmCellWithProjection], inputs: torch.Tensor, state: LstmState, compiled: bool = False
) -> tuple[torch.Tensor, LstmState]:
    """G layers of one shape, each over its own training window, in lockstep (:class:`LstmWindow`).

    inputs (G, T, B, in), state (h (G, B, P), c (G, B, C)) -> outputs (G, T, B, P) and the final (h, c). Under
    autocast the GEMMs run in the autocast dtype; the cells, outputs and state stay float32. ``compiled``: the step
    loops through ``torch.compile`` (:func:`~elmo.modules.lstm_bptt.forward_steps`).
    """
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
                                     first.cell_clip, proj_clip, matmul_dtype, compiled)
    return out, (h, c)


class InputGates(torch.autograd.Function):
    """(inputs (G, N, in), weight (G, 4C, in), bias (G, 1, 4C)) -> inputs weight^T + bias (G, N, 4C): the input half
    of the gates of every step. Its backward computes the weight's gradient as d_out^T inputs, already in the
    weight's (G, 4C, in) layout; autograd's gradient of ``weight.transpose(1, 2)`` comes out transposed, and copying
    it into a contiguous ``.grad`` took 18 times as long as a plain copy on CPU. The backward runs in the
    output's dtype (autocast's, when the forward ran under it), as autograd's would."""

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


class LstmStack(nn.Module):
    """L LSTM layers for one direction; layer l >= 1 adds its input to its output when ``residual`` is set.

    Dropout (training only) applies to each layer's input, before the residual add, as TF's
    ``DropoutWrapper(ResidualWrapper(cell), input_keep_prob)`` does in the original trainer; with
    ``variational_dropout`` each row keeps one mask over the window's time steps (:mod:`elmo.modules.dropout`).
    """

    def __init__(
        self, layers: list[LstmCellWithProjection], residual: bool, dropout: float = 0.0,
        variational_dropout: bool = False,
    ) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.residual = residual
        self.dropout = sequence_dropout(dropout, variational_dropout)

    def forward(
        self, inputs: torch.Tensor, mask: torch.Tensor | None = None, state: LstmState | None = None
    ) -> tuple[list[torch.Tensor], LstmState]:
        """(B, T, P) -> L outputs (B, T, P) and the stacked final state (h (L, B, P), c (L, B, C))."""
        outputs, hs, cs = [], [], []
        x = inputs
        for index, layer in enumerate(self.layers):
            layer_state = None if state is None else (state[0][index], state[1][index])
            x = self.dropout(x)
            out, (h, c) = layer(x, mask, layer_state)
            if self.residual and index > 0:
                out = out + x
            outputs.append(out)
            hs.append(h)
            cs.append(c)
            x = out
        return outputs, (torch.stack(hs), torch.stack(cs))


def run_stacks_in_lockstep(
    stacks: Sequence[LstmStack], inputs: torch.Tensor, state: LstmState, compiled: bool = False
) -> tuple[torch.Tensor, LstmState]:
    """G stacks of one architecture (the biLM's two directions) over their training windows, layer by layer in
    lockstep (:func:`run_windows`): half the per-step ops of running the two directions one after the other.

    inputs (G, T, B, in), state (h (G, L, B, P), c (G, L, B, C)) -> top outputs (G, T, B, P) and the final state
    in the same layout. Without gradients each stack runs on its own (the inference path). ``compiled``: see
    :func:`run_windows`.
    """
    if not torch.is_grad_enabled():
        tops, finals = [], []
        for g, stack in enumerate(stacks):
            layers, final = stack(inputs[g].transpose(0, 1), None, (state[0][g], state[1][g]))
            tops.append(layers[-1].transpose(0, 1))
            finals.append(final)
        return torch.stack(tops), (torch.stack([h for h, _ in finals]), torch.stack([c for _, c in finals]))
    hs, cs = [], []
    x = inputs
    for index in range(len(stacks[0].layers)):
        # each direction's own dropout module, on its (B, T, D) view
        x = torch.stack([stack.dropout(x[g].transpose(0, 1)).transpose(0, 1) for g, stack in enumerate(stacks)])
        layers = [stack.layers[index] for stack in stacks]
        out, (h, c) = run_windows(layers, x, (state[0][:, index], state[1][:, index]), compiled)
        if stacks[0].residual and index > 0:
            out = out + x
        hs.append(h)
        cs.append(c)
        x = out
    return x, (torch.stack(hs, dim=1), torch.stack(cs, dim=1))
