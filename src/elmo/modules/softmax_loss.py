"""The softmax losses of training (full and sampled), fused with their gradients, a block of rows at a time.

A softmax over K candidates (all V words, or the S sampled ones) materialises (N, K) logits, then reads and
writes matrices of that size several more times (log-softmax, its backward, dtype casts, the dense gradient of a
gathered weight): with N = 2,240 positions and K = 10,000 words that is 90 MB per pass, far beyond the caches, so
a 2-core CPU spends more time moving those matrices than multiplying. Here each block of ``block_rows`` rows goes
from logits to its log-sum-exp, its loss and, while the block is still in cache, to its gradient
(softmax - one-hot): the contributions to dL/dhidden, dL/dW and dL/db are accumulated in the forward pass and only
scaled by the incoming gradient in the backward pass. The arithmetic is that of the unfused losses of
:class:`~elmo.modules.softmax.Softmax` (same values up to float summation order).

With ``matmul_dtype=torch.bfloat16`` (bf16 autocast) the GEMMs read bfloat16 operands; the log-sum-exp, the loss
and every gradient returned are in the weight's dtype (float32).
"""

from __future__ import annotations

import torch


def _blockwise(hidden, weight, bias, block_rows, matmul_dtype, targets=None, true_logits=None, sampled=None):
    """Sum of -log softmax over K candidates and its gradients, block by block.

    The candidates are the rows of ``weight`` (K, P) with ``bias`` (K,). Either ``targets`` (N,) index the
    correct candidate (full softmax), or ``true_logits`` (N,) give the correct word's logit as an extra column
    and ``sampled`` (K,) the candidates' word ids, a candidate equal to the row's target being removed (sampled
    softmax; then ``targets`` are word ids). Returns (loss sum, d_hidden (N, P), d_weight (K, P), d_bias (K,),
    d_true (N,) or None), the gradients of the sum.
    """
    acc = bias.dtype
    low = matmul_dtype is not None and matmul_dtype != acc
    w = weight.to(matmul_dtype) if low else weight
    h_all = hidden.to(w.dtype)
    d_hidden = torch.empty(hidden.shape, dtype=acc, device=hidden.device)
    d_weight = torch.zeros(weight.shape, dtype=acc, device=weight.device)
    d_bias = torch.zeros(bias.shape, dtype=acc, device=bias.device)
    d_true = None if true_logits is None else torch.empty_like(true_logits)
    hit_rows, hit_columns = (None, None) if sampled is None else accidental_hits(targets, sampled)
    total = torch.zeros((), dtype=torch.float64, device=hidden.device)
    probs_mm = None  # (n, K) buffer of the normalised block in the GEMM dtype, when that is not float32
    for lo in range(0, hidden.shape[0], block_rows):
        rows = slice(lo, lo + block_rows)
        h, tgt = h_all[rows], targets[rows]
        n = h.shape[0]
        # (n, K) float32 logits; from bf16 GEMM output, the bias add is the cast (one pass)
        logits = torch.add(h @ w.t(), bias) if low else torch.addmm(bias, h, w.t())
        if sampled is None:
            correct = logits.gather(1, tgt.unsqueeze(1)).squeeze(1)  # (n,)
        else:
            in_block = (hit_rows >= lo) & (hit_rows < lo + n)
            logits[hit_rows[in_block] - lo, hit_columns[in_block]] = float("-inf")  # accidental hits removed
            correct = true_logits[rows]
        # log-sum-exp with a single exp pass: the shifted exponentials are also the unnormalised softmax
        shift = logits.amax(dim=1, keepdim=True)  # (n, 1)
        if sampled is not None:
            shift = torch.maximum(shift, correct.unsqueeze(1))
        exps = logits.sub_(shift).exp_()  # (n, K), in place
        sums = exps.sum(dim=1)  # (n,)
        if sampled is not None:
            sums += torch.exp(correct - shift.squeeze(1))  # the true class is one more candidate
        lse = shift.squeeze(1) + sums.log()  # (n,)
        total += (lse - correct).sum(dtype=torch.float64)
        inv_sums = sums.reciprocal_()  # (n,)
        if sampled is not None:
            d_true[rows] = torch.exp(correct - lse) - 1.0
        d_bias.addmv_(exps.t(), inv_sums)  # column sums of the softmax
        if low:  # normalise straight into the GEMM dtype
            if probs_mm is None or probs_mm.shape[0] != n:
                probs_mm = torch.empty(exps.shape, dtype=matmul_dtype, device=exps.device)
            probs = torch.mul(exps, inv_sums.unsqueeze(1), out=probs_mm)
        else:
            probs = exps.mul_(inv_sums.unsqueeze(1))
        if sampled is None:  # softmax - one-hot
            probs[torch.arange(n, device=tgt.device), tgt] -= 1.0
            d_bias.index_add_(0, tgt, torch.full((n,), -1.0, dtype=acc, device=tgt.device))
        if low:
            d_hidden[rows] = probs @ w
            d_weight += probs.t() @ h
        else:
            torch.mm(probs, w, out=d_hidden[rows])
            d_weight.addmm_(probs.t(), h)
    return total, d_hidden, d_weight, d_bias, d_true


def accidental_hits(targets: torch.Tensor, sampled: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, columns) where a row's target is among the distinct ``sampled`` ids (S,): a binary search per row
    instead of comparing the (N, S) matrix of all pairs."""
    ordered, order = sampled.sort()  # (S,)
    position = torch.searchsorted(ordered, targets).clamp_(max=ordered.shape[0] - 1)  # (N,)
    rows = (ordered[position] == targets).nonzero().squeeze(1)
    return rows, order[position[rows]]


class _FusedLoss(torch.autograd.Function):
    """Shared backward: the forward pass saved the gradients of the mean loss; scale them by the incoming one."""

    @staticmethod
    def _save(ctx, rows, total, d_hidden, d_weight, d_bias, hidden, n_inputs):
        scale = 1.0 / rows
        ctx.n_constants = n_inputs - 3  # inputs after hidden, weight and bias get no gradient
        ctx.save_for_backward(d_hidden.mul_(scale), d_weight.mul_(scale), d_bias.mul_(scale))
        ctx.hidden_dtype = hidden.dtype
        return (total * scale).to(d_bias.dtype)

    @staticmethod
    def backward(ctx, grad):
        d_hidden, d_weight, d_bias = ctx.saved_tensors
        return (d_hidden * grad).to(ctx.hidden_dtype), d_weight * grad, d_bias * grad, *[None] * ctx.n_constants


class FusedSoftmaxLoss(_FusedLoss):
    """(hidden (N, P), weight (V, P), bias (V,), targets (N,)) -> mean full-softmax cross-entropy (scalar)."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, block_rows=512, matmul_dtype=None):
        total, d_hidden, d_weight, d_bias, _ = _blockwise(hidden, weight, bias, block_rows, matmul_dtype, targets)
        return _FusedLoss._save(ctx, hidden.shape[0], total, d_hidden, d_weight, d_bias, hidden, 6)


class FusedSampledSoftmaxLoss(_FusedLoss):
    """TF's ``sampled_softmax_loss`` (mean over rows): the true logit and S sampled ones, each corrected by
    ``-log(expected count)``, accidental hits removed.

    Args: hidden (N, P), weight (V, P), bias (V,), targets (N,), sampled (S,) distinct ids, log_expected (S,)
    and target_log_expected (N,) the logs of their expected counts.
    """

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, sampled, log_expected, target_log_expected, block_rows=512,
                matmul_dtype=None):
        acc = bias.dtype
        w_target = weight[targets]  # (N, P)
        true_logits = (hidden.to(acc) * w_target).sum(-1) + bias[targets] - target_log_expected  # (N,)
        total, d_hidden, d_sampled_w, d_sampled_b, d_true = _blockwise(
            hidden, weight[sampled], bias[sampled] - log_expected, block_rows, matmul_dtype, targets,
            true_logits, sampled,
        )
        d_hidden.addcmul_(d_true.unsqueeze(1), w_target)
        d_weight = torch.zeros_like(weight).index_add_(0, sampled, d_sampled_w)
        d_weight.index_add_(0, targets, d_true.unsqueeze(1) * hidden.to(acc))
        d_bias = torch.zeros_like(bias).index_add_(0, sampled, d_sampled_b).index_add_(0, targets, d_true)
        return _FusedLoss._save(ctx, hidden.shape[0], total, d_hidden, d_weight, d_bias, hidden, 9)
