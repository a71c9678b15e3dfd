"""The softmax losses of training (full and sampled), fused with their gradients, a block of rows at a time.

A softmax over K candidates (all V words, or the S sampled ones) materialises (N, K) logits, then reads and
writes matrices of that size several more times (log-softmax, its backward, dtype casts, the dense gradient of a
gathered weight): with N = 2,240 positions and K = 10,000 words that is 90 MB per pass, far beyond the caches, so
a 2-core CPU spends more time moving those matrices than multiplying. Here each block of ``block_rows`` rows goes
from logits to its log-sum-exp, its loss and, while the block is still in cache, to its gradient
(softmax - one-hot): the contributions to dL/dhidden, dL/dW and dL/db are accumulated in the forward pass and only
scaled by the incoming gradient in the backward pass. The arithmetic is that of the unfused losses of
:class:`~elmo.modules.softmax.Softmax` (same values up to float summation order).

One call takes several *parts* (the biLM's two directions, each with its own rows, targets and negatives) and
returns the mean of their mean losses, with ONE (V, P) weight gradient for all parts, handed to autograd as is.
(Two separate losses would each fill, scale and copy a (V, P) matrix, and autograd would add the two: for a
50,000-word vocabulary that is more time than the softmax's GEMMs.) The full softmax accumulates it densely and
the backward pass scales it in place; the sampled one touches only the rows of its negatives and targets, so it
keeps those rows until the backward pass, which scales them and adds them into a zeroed (V, P) matrix. The
gradients are computed once, so the graph can be backpropagated once.

With ``matmul_dtype=torch.bfloat16`` (bf16 autocast) the GEMMs read bfloat16 operands; the log-sum-exp, the loss
and every gradient returned are in the weight's dtype (float32). With compiling on (:mod:`elmo.modules.compiled`)
each block's elementwise work, from the GEMM's output to the scaled softmax in the GEMM dtype and its column sums,
is one pure function (:func:`softmax_block`) through ``torch.compile``: one or two reads of the block instead of a
dozen passes over a float32 copy of it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from elmo.modules.compiled import compile_enabled, run_compiled

_WHAT = "the softmax loss blocks"  # for the warning when compiling fails


def _blockwise(hidden, weight, bias, targets, d_weight, d_bias, scale, block_rows, matmul_dtype,
               true_logits=None, hits=None):
    """Sum of -log softmax over K candidates; adds ``scale`` x its gradients to ``d_weight`` and ``d_bias``.

    The candidates are the rows of ``weight`` (K, P) with ``bias`` (K,). Either ``targets`` (N,) index the
    correct candidate (full softmax), or ``true_logits`` (N,) give the correct word's logit as an extra column
    and ``hits`` the (rows, columns) where a candidate is the row's target (:func:`accidental_hits`), removed
    (sampled softmax; then ``targets`` are word ids). Returns (loss sum, scale x d_hidden (N, P), scale x d_true (N,) or
    None); ``d_weight`` (K, P) and ``d_bias`` (K,) are accumulated in place.

    Eager, a block goes from logits to its softmax through PyTorch's fused softmax kernel (max, exp, sum and
    normalisation in one sweep per row; on CPU cheaper than ``exp_`` alone, which PyTorch's MKL builds route through
    MKL's vector math library), and the log-sum-exp is read off its largest
    probability, so no other pass over the block exponentiates. With compiling on, the block's elementwise work from the
    GEMM's output to the scaled gradient in the GEMM dtype is :func:`softmax_block` through ``torch.compile``.
    """
    acc = bias.dtype
    mm = matmul_dtype if matmul_dtype is not None else acc
    w = weight.to(mm)
    h_all = hidden.to(mm)
    n_rows, k = hidden.shape[0], weight.shape[0]
    d_hidden = torch.empty(hidden.shape, dtype=acc, device=hidden.device)
    d_true = None if true_logits is None else torch.empty_like(true_logits)
    sampled = hits is not None
    total = torch.zeros((), dtype=torch.float64, device=hidden.device)
    logits_mm = probs_mm = None  # (n, K) buffers in the GEMM dtype, when that is not float32
    for lo in range(0, n_rows, block_rows):
        rows = slice(lo, lo + block_rows)
        h, tgt = h_all[rows], targets[rows]
        n = h.shape[0]
        block = None
        if compile_enabled():
            logits = torch.mm(h, w.t())  # (n, K), no bias yet
            if sampled:
                _remove_accidental_hits(logits, *hits, lo, n)
            block = run_compiled(softmax_block, _WHAT, logits, bias, true_logits[rows] if sampled else None,
                                 None if sampled else tgt, scale)
        if block is not None:
            probs, column_sums, lse, correct = block
            d_bias += column_sums
        else:
            if mm == acc:
                logits = torch.addmm(bias, h, w.t())  # (n, K)
            else:  # the GEMM's bf16 output, then a cast and a float32 add (one mixed-dtype add is slower on CPU)
                if logits_mm is None or logits_mm.shape[0] != n:
                    logits_mm, probs_mm = (torch.empty((n, k), dtype=mm, device=h.device) for _ in range(2))
                logits = torch.mm(h, w.t(), out=logits_mm).to(acc).add_(bias)
            if not sampled:
                correct = logits.gather(1, tgt.unsqueeze(1)).squeeze(1)  # (n,)
            else:
                _remove_accidental_hits(logits, *hits, lo, n)
                correct = true_logits[rows]
            top = logits.amax(dim=1)  # (n,)
            if sampled and k == 1:  # a row whose only negative was its target has none
                logits[torch.isneginf(top)] = 0.0  # left: any finite values do, its row_scale is exp(-inf) = 0
            probs = torch.softmax(logits, dim=1)  # (n, K)
            lse = top - probs.amax(dim=1).log()  # (n,): the largest probability is exp(0) / sum
            row_scale = torch.full_like(lse, scale)  # normalises and scales the block's gradients at once
            if sampled:  # the true class is one more candidate
                lse_all = torch.logaddexp(lse, correct)
                row_scale.mul_(torch.exp(lse - lse_all))
                lse = lse_all
            d_bias.addmv_(probs.t(), row_scale)  # column sums of the scaled softmax
            probs.mul_(row_scale.unsqueeze(1))
            if mm != acc:  # into the GEMM dtype (scaling in place, then casting, beats one mixed-dtype multiply)
                probs = probs_mm.copy_(probs)
        if sampled:
            d_true[rows] = (torch.exp(correct - lse) - 1.0) * scale
        total += (lse - correct).sum(dtype=torch.float64)
        if not sampled:  # softmax - one-hot
            probs[torch.arange(n, device=tgt.device), tgt] -= scale
            d_bias.index_add_(0, tgt, torch.full((n,), -scale, dtype=acc, device=tgt.device))
        if mm == acc:
            torch.mm(probs, w, out=d_hidden[rows])
            d_weight.addmm_(probs.t(), h)
        else:
            d_hidden[rows] = probs @ w
            d_weight += probs.t() @ h
    return total, d_hidden, d_true


def _remove_accidental_hits(logits, hit_rows, hit_columns, lo, n):
    """-inf at the (row, column) pairs of ``accidental_hits`` that fall in the block of rows lo .. lo + n."""
    in_block = (hit_rows >= lo) & (hit_rows < lo + n)
    logits[hit_rows[in_block] - lo, hit_columns[in_block]] = float("-inf")


def softmax_block(logits, bias, true_logits, targets, scale: float):
    """One block's elementwise work, as a pure function for ``torch.compile`` (:func:`_blockwise`).

    logits (n, K) in the GEMM dtype, without the bias (K,); either ``true_logits`` (n,) (sampled softmax: the true
    class is one more candidate) or ``targets`` (n,) (full softmax: the correct column). Returns (scale x softmax
    (n, K) in the GEMM dtype, normalised over all candidates; its column sums (K,) and the log-sum-exp and correct
    logits (n,), in the bias's dtype). exp(x - top) times exp(top - lse) normalises without dividing by the row
    sum, so a row whose every candidate is -inf (its only negative was its target) gets zeros, not NaN.
    """
    x = logits.to(bias.dtype) + bias  # (n, K) in float32 (float64 in tests)
    correct = true_logits if targets is None else x.gather(1, targets.unsqueeze(1)).squeeze(1)
    top = x.amax(dim=1, keepdim=True)
    top = torch.where(torch.isneginf(top), 0.0, top)
    e = torch.exp(x - top)
    lse = top + torch.log(e.sum(dim=1, keepdim=True))  # (n, 1)
    if targets is None:
        lse = torch.logaddexp(lse, correct.unsqueeze(1))
    probs = e * (scale * torch.exp(top - lse))
    return probs.to(logits.dtype), probs.sum(dim=0), lse.squeeze(1), correct


def accidental_hits(targets: torch.Tensor, sampled: torch.Tensor, vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, columns) where a row's target (N,) is among the distinct ``sampled`` ids (S,), rows ascending: one
    lookup per row in a table of each word's column (V slots), instead of comparing the (N, S) matrix of all pairs
    (or sorting the S ids, much slower on CPU)."""
    column = torch.full((vocab_size,), -1, dtype=torch.long, device=sampled.device)
    column[sampled] = torch.arange(sampled.shape[0], device=sampled.device)
    hit = column[targets]  # (N,): the target's column among the candidates, or -1
    rows = (hit >= 0).nonzero().squeeze(1)
    return rows, hit[rows]


def _full_part(weight, bias, d_weight, d_bias, scale, block_rows, matmul_dtype, hidden, targets):
    return _blockwise(hidden, weight, bias, targets, d_weight, d_bias, scale, block_rows, matmul_dtype)[:2]


def _sampled_part(weight, bias, d_weight, d_bias, scale, block_rows, matmul_dtype, hidden, targets,
                  sampled, log_expected, target_log_expected):
    """As :func:`_full_part`, but ``d_weight`` is a list that collects the gradient's (ids, rows) pairs."""
    acc = bias.dtype
    # index_select, not weight[ids]: the same rows, copied whole instead of element by element
    w_target = weight.index_select(0, targets)  # (N, P)
    true_logits = (hidden.to(acc) * w_target).sum(-1) + bias.index_select(0, targets) - target_log_expected  # (N,)
    d_sampled_w = torch.zeros(sampled.shape[0], weight.shape[1], dtype=acc, device=weight.device)  # (S, P)
    d_sampled_b = torch.zeros(sampled.shape, dtype=acc, device=bias.device)
    total, d_hidden, d_true = _blockwise(hidden, weight.index_select(0, sampled),
                                         bias.index_select(0, sampled) - log_expected, targets,
                                         d_sampled_w, d_sampled_b, scale, block_rows, matmul_dtype,
                                         true_logits, accidental_hits(targets, sampled, weight.shape[0]))
    d_hidden.addcmul_(d_true.unsqueeze(1), w_target)
    d_weight.extend([(sampled, d_sampled_w), (targets, d_true.unsqueeze(1) * hidden.to(acc))])  # (ids, rows) pairs
    d_bias.index_add_(0, sampled, d_sampled_b).index_add_(0, targets, d_true)
    return total, d_hidden


class FusedSoftmaxLoss(torch.autograd.Function):
    """(weight (V, P), bias (V,), block_rows, matmul_dtype, sparse, fields per part, *the parts' tensors,
    flattened) -> (mean over parts of each part's mean loss, (G,) the parts' mean losses, without gradient).
    ``sparse``: the sampled loss hands the weight its gradient as a sparse (V, P) tensor of the rows it touched
    (coalesced: one row per word, :func:`summed_rows`), as ``nn.Embedding(sparse=True)`` does, instead of adding
    them into a zeroed dense matrix.

    A part of 2 fields is (hidden (N, P), targets (N,)): the full softmax. A part of 5 fields is TF's
    ``sampled_softmax_loss``: (hidden, targets, sampled (S,) distinct ids, log_expected (S,), target_log_expected
    (N,)), the true logit and the S sampled ones each corrected by ``-log(expected count)``, accidental hits
    removed.
    """

    @staticmethod
    def forward(ctx, weight, bias, block_rows, matmul_dtype, sparse, fields, *flat):
        part_loss = _full_part if fields == 2 else _sampled_part
        parts = [flat[k : k + fields] for k in range(0, len(flat), fields)]
        # the full softmax's weight gradient is dense; the sampled one's is kept as (ids, rows) pairs until backward
        d_weight, d_bias = torch.zeros_like(weight) if fields == 2 else [], torch.zeros_like(bias)
        losses, d_hiddens = [], []
        for hidden, *rest in parts:
            scale = 1.0 / (len(parts) * hidden.shape[0])
            total, d_hidden = part_loss(weight, bias, d_weight, d_bias, scale, block_rows, matmul_dtype, hidden, *rest)
            losses.append(total / hidden.shape[0])
            d_hiddens.append(d_hidden)
        ctx.gradients = d_weight, d_bias, d_hiddens  # kept off save_for_backward: handed to autograd, not copied
        ctx.hidden_dtypes = [part[0].dtype for part in parts]
        ctx.weight_shape = weight.shape
        ctx.fields = fields
        ctx.sparse = sparse
        part_losses = torch.stack(losses).to(bias.dtype)
        ctx.mark_non_differentiable(part_losses)
        return part_losses.mean(), part_losses

    @staticmethod
    def backward(ctx, grad, _):
        if ctx.gradients is None:
            raise RuntimeError("the fused softmax loss can be backpropagated only once (retain_graph is not supported)")
        d_weight, d_bias, d_hiddens = ctx.gradients
        ctx.gradients = None
        inputs = []
        for d_hidden, dtype in zip(d_hiddens, ctx.hidden_dtypes):
            inputs += [(d_hidden * grad).to(dtype)] + [None] * (ctx.fields - 1)
        if isinstance(d_weight, list):  # scale the sampled rows (a few thousand), not the (V, P) sum
            pieces = d_weight
            if ctx.sparse:
                d_weight = summed_rows(pieces, ctx.weight_shape, grad)
            else:  # each piece added where it is: no concatenated copy
                d_weight = d_bias.new_zeros(ctx.weight_shape)
                for ids, rows in pieces:
                    d_weight.index_add_(0, ids, rows.mul_(grad))
        else:
            d_weight.mul_(grad)
        return d_weight, d_bias.mul_(grad), None, None, None, None, *inputs


def summed_rows(pieces: Sequence[tuple[torch.Tensor, torch.Tensor]], shape: torch.Size,
                scale: torch.Tensor) -> torch.Tensor:
    """(ids (R_k,), rows (R_k, P)) pairs, ids repeated within and across them -> the coalesced sparse tensor of
    ``shape`` (V, P) holding ``scale`` x each id's sum of rows: ``coalesce()``'s result, with a table of V slots in
    place of its sort."""
    ids = torch.cat([ids for ids, _ in pieces])  # (R,)
    present = torch.zeros(shape[0], dtype=torch.bool, device=ids.device)
    present[ids] = True
    distinct = present.nonzero().squeeze(1)  # (U,) ascending
    slot = torch.empty(shape[0], dtype=torch.long, device=ids.device)
    slot[distinct] = torch.arange(distinct.shape[0], device=ids.device)
    values = pieces[0][1].new_zeros(distinct.shape[0], shape[1])  # (U, P)
    for ids, rows in pieces:
        values.index_add_(0, slot[ids], rows)
    values.mul_(scale)
    return torch.sparse_coo_tensor(distinct.unsqueeze(0), values, shape, is_coalesced=True, check_invariants=False)


def fused_loss(weight: torch.Tensor, bias: torch.Tensor, parts: Sequence[Sequence[torch.Tensor]],
               block_rows: int = 512, matmul_dtype: torch.dtype | None = None,
               sparse: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """:class:`FusedSoftmaxLoss` over ``parts`` (all full, or all sampled): (mean loss, (G,) part losses).
    ``sparse``: the
    sampled loss's weight gradient as a sparse tensor of its rows (the full softmax's is dense either way)."""
    flat = [tensor for part in parts for tensor in part]
    return FusedSoftmaxLoss.apply(weight, bias, block_rows, matmul_dtype, sparse, len(parts[0]), *flat)
