"""LSTM layers with a projection and clipping (bilm-tf's cell), and a stack of them with residual connections.

The cell's arithmetic lives in :mod:`elmo.modules.lstm_kernel`; this module runs it over sequences, by one of three
paths chosen by what the call needs:

- training windows (gradients, no mask): every row runs all T steps, one autograd node per layer and window with
  a hand-written backward (:mod:`elmo.modules.lstm_window`); :func:`run_stacks_in_lockstep` runs the biLM's two
  directions through it together, one batched op for both at every step;
- masked batches with gradients: step by step, one autograd node per step (:class:`~elmo.modules.lstm_kernel.LstmStep`),
  rows frozen after their last token;
- inference (no autograd): rows sorted by length so step t touches only the n_t rows still running (no masking),
  the forget offset folded into the input half once.

In every path the input half of the gates is one GEMM for all time steps (it does not depend on the recurrence),
and the memory cells stay float32 even when the weights are bfloat16, so long sentences do not accumulate rounding.
The first layer's input is a token vector, a function of the word alone, so where the caller has the batch's
distinct words (:class:`WordTable`), inference computes that layer's input half once per distinct word and gathers
it for every position: in a default batch of running text a quarter as many rows as positions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
from torch import nn

from elmo.modules.autocast import autocast_suspended
from elmo.modules.lstm_kernel import LstmStep, cell_forward, fold_forget_bias, project
from elmo.modules.lstm_window import run_windows
from elmo.modules.shape_buckets import bucket_rows, buckets_shapes

LstmState = tuple[torch.Tensor, torch.Tensor]
"""(h, c): h (..., B, P) the projected output, c (..., B, C) the memory cells."""


class WordTable(NamedTuple):
    """A layer's inputs given as a batch's distinct words: ``vectors`` (U, in), and ``index`` (B, T), each position's
    row in it (row 0 is the padding's: its vector is zero). ``vectors[index]`` is the (B, T, in) input."""

    vectors: torch.Tensor
    index: torch.Tensor


INPUT_WINDOW_ROWS = 2048
INPUT_WINDOW_BYTES = 64 << 20
"""Inference computes the input half of the gates for up to INPUT_WINDOW_ROWS positions at a time, into a buffer
(rows x 4C) of at most INPUT_WINDOW_BYTES: 2,048 rows (1,024 for the original configuration in fp32). A GEMM that
big runs near the machine's peak, and the buffer stays bounded for any batch, so its fresh pages stay few (the
sizes tried: docs/benchmarks/embedding.md)."""

WORD_GATES_BYTES = 128 << 20
"""Inference computes the first layer's input half per distinct word (:class:`WordTable`) when that table of gates,
words x 4C, fits in this many bytes (2,048 words of the original configuration in fp32: a default batch of running
text has up to ~1,750) and has fewer rows than the batch has positions; otherwise per position."""

CPU_GEMM_COLUMNS = 1024
"""On CPU, inference's fp32 gate GEMMs (rows x P x 4C) run in blocks of this many output columns, with the same
outputs: for wide layers (the original's 4C = 16384) that beats one MKL call over all the columns, most on AVX2
CPUs, probably because each block of the weights is reused while it is in cache (docs/benchmarks/embedding.md)."""


def step_windows(running: Sequence[int], max_rows: int) -> list[tuple[int, int, int]]:
    """Consecutive steps grouped into windows of at most ``max_rows`` rows in all (a step with more rows gets a
    window to itself): (start, stop, rows) per window, over the steps with rows (``running`` is non-increasing)."""
    windows, start, stop, rows = [], 0, 0, 0
    for t, n in enumerate(running):
        if n == 0:
            break
        if rows and rows + n > max_rows:
            windows.append((start, t, rows))
            start, rows = t, 0
        rows += n
        stop = t + 1
    if rows:
        windows.append((start, stop, rows))
    return windows


def addmm_by_columns(out: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, bias: torch.Tensor | None = None,
                     columns: int | None = None) -> None:
    """out (n, N) = (bias (N,) if given, else out) + mat1 (n, K) @ mat2 (K, N), in place, ``columns`` output
    columns per GEMM (None: one GEMM)."""
    step = columns or out.shape[-1]
    for start in range(0, out.shape[-1], step):
        cols = slice(start, start + step)
        if bias is None:
            out[:, cols].addmm_(mat1, mat2[:, cols])
        else:
            torch.addmm(bias[cols], mat1, mat2[:, cols], out=out[:, cols])


class LstmCellWithProjection(nn.Module):
    """One LSTM layer with projection, run over a whole (left-aligned, padded) sequence.

    ``cell_clip``, ``proj_clip``: the architecture's (:class:`~elmo.config.LSTMConfig`), None for no clip.
    ``forget_bias``: TF's constant offset of the forget gate.
    """

    def __init__(
        self,
        input_dim: int,
        cell_dim: int,
        projection_dim: int,
        cell_clip: float | None,
        proj_clip: float | None,
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
        self, inputs: torch.Tensor, mask: torch.Tensor | None = None, state: LstmState | None = None,
        words: WordTable | None = None,
    ) -> tuple[torch.Tensor, LstmState]:
        """Run the cell over time.

        Args:
            inputs: (B, T, input_dim).
            mask: (B, T) bool, True for real tokens, padding only at the end of a row. The state stops
                changing after a row's last token, so the returned state is the state after that token.
            state: initial (h (B, P), c (B, C)); zeros when None.
            words: the same inputs as distinct words, where the caller has them: inference then computes the input
                half once per word (:data:`WORD_GATES_BYTES`); the same outputs.

        Returns:
            outputs (B, T, P), zero at padded positions, and the final state (h, c).
        """
        if not torch.is_grad_enabled():
            return self._run_inference(inputs, mask, state, words)
        if mask is None and inputs.shape[1] > 0:
            return self._run_window(inputs, state)  # training windows: every row runs all T steps
        return self._run_autograd(inputs, mask, state)

    def _run_window(self, inputs: torch.Tensor, state: LstmState | None) -> tuple[torch.Tensor, LstmState]:
        """Unmasked (B, T, in) with gradients: one layer through :func:`~elmo.modules.lstm_window.run_windows`."""
        h, c = state if state is not None else self.zero_state(inputs.shape[0], inputs)
        out, (h, c) = run_windows([self], inputs.transpose(0, 1).unsqueeze(0), (h.unsqueeze(0), c.unsqueeze(0)))
        return out[0].transpose(0, 1), (h[0], c[0])  # (B, T, P)

    def _recurrent_weight(self) -> torch.Tensor:
        """(4C, P) recurrent matrix, with this call's DropConnect mask in training."""
        weight = self.state_linearity.weight
        if not self.training or self.weight_dropout == 0.0:
            return weight
        # from uniform draws: cheaper than F.dropout's Bernoulli sampling on CPU
        keep = torch.rand_like(weight).ge_(self.weight_dropout).div_(1.0 - self.weight_dropout)  # (4C, P)
        return weight * keep

    def _run_autograd(
        self, inputs: torch.Tensor, mask: torch.Tensor | None, state: LstmState | None
    ) -> tuple[torch.Tensor, LstmState]:
        """Masked batches with gradients: one :class:`~elmo.modules.lstm_kernel.LstmStep` node per step, rows kept at
        their state after their last token. Under autocast the GEMMs read the autocast dtype, as in the window."""
        batch, time, _ = inputs.shape
        h, c = state if state is not None else self.zero_state(batch, inputs)
        x_gates = self.input_linearity(inputs)  # (B, T, 4C): all time steps in one GEMM
        # unbind, not x_gates[:, t]: autograd stacks the T step gradients once instead of adding T full-size tensors
        x_steps = x_gates.unbind(1)  # T x (B, 4C)
        w_state = self._recurrent_weight()
        w_proj = self.projection.weight if self.projection is not None else None
        outputs = []
        with autocast_suspended(inputs.device) as matmul_dtype:
            mm = matmul_dtype or w_state.dtype
            w_state_t = w_state.to(mm).t()  # (P, 4C), cast once for all steps
            w_proj_t = None if w_proj is None else w_proj.to(mm).t()  # (C, P)
            proj_clip = self.proj_clip if w_proj is not None else None
            for t in range(time):
                h_new, c_new = LstmStep.apply(x_steps[t], h, c, w_state_t, w_proj_t, self.forget_bias,
                                              self.cell_clip, proj_clip)
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
        self, inputs: torch.Tensor, mask: torch.Tensor | None, state: LstmState | None, words: WordTable | None
    ) -> tuple[torch.Tensor, LstmState]:
        """Without autograd: the rows sorted by length, so step t runs the n_t rows still going and nothing else.

        The input half of the gates is computed for real positions only (padding never enters a GEMM), a window
        of steps at a time (:data:`INPUT_WINDOW_ROWS`) into one buffer that each step's recurrent GEMM then adds
        into, in place; on CPU both GEMMs run in blocks of :data:`CPU_GEMM_COLUMNS` output columns. With ``words``,
        the input half is computed once per distinct word and each window gathers its rows from that table: the
        same values, as a GEMM's row does not depend on the other rows (``tests/modules/test_lstm.py``).
        """
        batch, time, _ = inputs.shape
        dtype = self.state_linearity.weight.dtype
        lengths = mask.sum(dim=1) if mask is not None else inputs.new_full((batch,), time, dtype=torch.long)
        lengths, order = lengths.sort(descending=True)  # (B,), rows longest first
        steps = torch.arange(time, device=lengths.device).unsqueeze(1)  # (T, 1)
        running = (lengths.unsqueeze(0) > steps).sum(dim=1).tolist()  # running[t] = rows still going at step t
        h0, c0 = state if state is not None else self.zero_state(batch, inputs)
        h0, c = h0[order].to(dtype), c0[order].float()  # (B, P), (B, C); c is ours to update in place
        w_input_t = self.input_linearity.weight.t()  # (in, 4C)
        w_state_t = self.state_linearity.weight.t()  # (P, 4C)
        w_proj_t = None if self.projection is None else self.projection.weight.t()  # (C, P)
        out = inputs.new_zeros(time, batch, self.output_dim, dtype=dtype)  # (T, B, P)
        windows = step_windows(running, self.input_window_rows())
        gemm_rows = bucket_rows if buckets_shapes(dtype, inputs.device) else int  # zero rows pad a bucketed GEMM
        columns = CPU_GEMM_COLUMNS if inputs.device.type == "cpu" and dtype == torch.float32 else None
        buffer = inputs.new_empty(max((gemm_rows(rows) for *_, rows in windows), default=0), w_input_t.shape[1],
                                  dtype=dtype)
        word_gates = self._word_gates(words, sum(running), gemm_rows, columns)  # (U', 4C) or None
        if word_gates is None:
            sorted_inputs = inputs[order].transpose(0, 1).to(dtype)  # (T, B, in)
        else:
            sorted_inputs = words.index[order].transpose(0, 1)  # (T, B): each position's row of word_gates
        for start, stop, rows in windows:
            if word_gates is not None:  # step t's n_t rows follow step t-1's
                packed = torch.cat([sorted_inputs[t, : running[t]] for t in range(start, stop)])  # (rows,)
                x_gates = torch.index_select(word_gates, 0, packed, out=buffer[:rows])  # (rows, 4C)
            else:
                packed = [sorted_inputs[t, : running[t]] for t in range(start, stop)]
                if gemm_rows(rows) > rows:
                    packed.append(sorted_inputs.new_zeros(gemm_rows(rows) - rows, sorted_inputs.shape[2]))
                packed = torch.cat(packed)  # (rows', in)
                x_gates = buffer[: len(packed)]  # (rows', 4C): step t's n_t rows follow step t-1's
                addmm_by_columns(x_gates, packed, w_input_t, self.input_linearity.bias, columns)
                fold_forget_bias(x_gates, self.forget_bias)
            offset = 0
            for t in range(start, stop):
                n = running[t]
                h_prev = h0[:n] if t == 0 else out[t - 1, :n]  # (n, P)
                gates = x_gates[offset : offset + n]  # (n, 4C)
                offset += n
                addmm_by_columns(gates, h_prev, w_state_t, columns=columns)
                # float32 from here: one cast per step (bf16), instead of one per mixed-dtype op
                *_, hidden = cell_forward(gates.float(), c[:n], None, self.cell_clip, exact_tanh=True, in_place=True)
                if w_proj_t is None:
                    out[t, :n] = hidden
                    continue
                project(hidden.to(dtype), w_proj_t, self.proj_clip, out=out[t, :n])  # (n, P)
        h_final = self._final_outputs(out, lengths, h0)  # (B, P)
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(batch, device=order.device)
        outputs = out.transpose(0, 1)[inverse]  # (B, T, P), padding stays zero
        return outputs, (h_final[inverse].to(h0.dtype), c[inverse].to(c0.dtype))

    def _word_gates(self, words: WordTable | None, positions: int, gemm_rows: Callable[[int], int],
                    columns: int | None) -> torch.Tensor | None:
        """The input half of every distinct word, forget offset folded, (U', 4C) (U' = U, or more zero rows where
        shapes are bucketed); None where it would not pay (as many words as positions) or not fit
        (:data:`WORD_GATES_BYTES`)."""
        if words is None:
            return None
        weight = self.input_linearity.weight  # (4C, in)
        count = len(words.vectors)
        if count >= positions or count * weight.shape[0] * weight.element_size() > WORD_GATES_BYTES:
            return None
        vectors = words.vectors.to(weight.dtype)  # (U, in)
        if gemm_rows(count) > count:
            vectors = torch.cat([vectors, vectors.new_zeros(gemm_rows(count) - count, vectors.shape[1])])
        gates = vectors.new_empty(len(vectors), weight.shape[0])  # (U', 4C)
        addmm_by_columns(gates, vectors, weight.t(), self.input_linearity.bias, columns)
        fold_forget_bias(gates, self.forget_bias)
        return gates

    def input_window_rows(self) -> int:
        """Inference's input-GEMM rows at most (:data:`INPUT_WINDOW_ROWS`, :data:`INPUT_WINDOW_BYTES`): the grouping
        of steps that :mod:`elmo.modules.long_sequences` keeps, window by window, to compute the same bits."""
        weight = self.input_linearity.weight  # (4C, in)
        return max(1, min(INPUT_WINDOW_ROWS, INPUT_WINDOW_BYTES // (weight.shape[0] * weight.element_size())))

    @staticmethod
    def _final_outputs(out: torch.Tensor, lengths: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
        """h after each row's last token: out (T, B, P) at step length - 1, or the initial h for empty rows."""
        if out.shape[0] == 0:
            return h0
        ended = lengths > 0
        last = out[torch.where(ended, lengths - 1, 0), torch.arange(lengths.shape[0], device=out.device)]  # (B, P)
        return torch.where(ended.unsqueeze(1), last, h0)


class LstmStack(nn.Module):
    """L LSTM layers for one direction; layer l >= 1 adds its input to its output when ``residual`` is set.

    Dropout (training only) applies to each layer's input, before the residual add, as TF's
    ``DropoutWrapper(ResidualWrapper(cell), input_keep_prob)`` does in the original trainer.
    """

    def __init__(self, layers: list[LstmCellWithProjection], residual: bool, dropout: float = 0.0) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.residual = residual
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, inputs: torch.Tensor, mask: torch.Tensor | None = None, state: LstmState | None = None,
        words: WordTable | None = None,
    ) -> tuple[list[torch.Tensor], LstmState]:
        """(B, T, P) -> L outputs (B, T, P) and the stacked final state (h (L, B, P), c (L, B, C)). ``words``: the
        inputs as distinct words (:class:`WordTable`), for the first layer; unused where dropout changes them."""
        outputs, hs, cs = [], [], []
        x = inputs
        if self.training and self.dropout.p > 0:
            words = None
        for index, layer in enumerate(self.layers):
            layer_state = None if state is None else (state[0][index], state[1][index])
            x = self.dropout(x)
            out, (h, c) = layer(x, mask, layer_state, words if index == 0 else None)
            x = self.with_residual(index, out, x)
            outputs.append(x)
            hs.append(h)
            cs.append(c)
        return outputs, (torch.stack(hs), torch.stack(cs))

    def with_residual(self, index: int, out: torch.Tensor, layer_input: torch.Tensor) -> torch.Tensor:
        """Layer ``index``'s output, plus its input from the second layer on when the stack is residual."""
        return out + layer_input if self.residual and index > 0 else out


def run_stacks_in_lockstep(
    stacks: Sequence[LstmStack], inputs: torch.Tensor, state: LstmState
) -> tuple[torch.Tensor, LstmState]:
    """G stacks of one architecture (the biLM's two directions) over their training windows, layer by layer in
    lockstep (:func:`~elmo.modules.lstm_window.run_windows`): half the per-step ops of running the two directions
    one after the other.

    inputs (G, T, B, in), state (h (G, L, B, P), c (G, L, B, C)) -> top outputs (G, T, B, P) and the final state
    in the same layout. Without gradients each stack runs on its own (the inference path).
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
        out, (h, c) = run_windows(layers, x, (state[0][:, index], state[1][:, index]))
        x = stacks[0].with_residual(index, out, x)
        hs.append(h)
        cs.append(c)
    return x, (torch.stack(hs, dim=1), torch.stack(cs, dim=1))
