"""The fused, blockwise softmax losses of training against F.cross_entropy and TF's sampled softmax."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from elmo.modules.softmax import Softmax
from elmo.modules.softmax_loss import accidental_hits, fused_loss, summed_rows
from elmo.runtime.compile_switch import compile_setting


def _case(dtype=torch.float64, rows=37, vocab=50, dim=8):
    torch.manual_seed(0)
    softmax = Softmax(vocab, dim).to(dtype)
    with torch.no_grad():
        softmax.bias.normal_()
    hidden = torch.randn(rows, dim, dtype=dtype, requires_grad=True)
    targets = torch.randint(0, vocab, (rows,))
    return softmax, hidden, targets


def _loss_and_grads(loss_fn, softmax, hidden):
    loss = loss_fn()
    grads = torch.autograd.grad(loss * 3.5, [hidden, softmax.weight, softmax.bias])  # any upstream scale
    return loss, grads


@pytest.mark.parametrize("block_rows", [1, 5, 37, 512])
def test_fused_loss_equals_cross_entropy_with_its_gradients(block_rows):
    softmax, hidden, targets = _case()
    ref = _loss_and_grads(lambda: F.cross_entropy(F.linear(hidden, softmax.weight, softmax.bias), targets),
                          softmax, hidden)
    ours = _loss_and_grads(lambda: fused_loss(softmax.weight, softmax.bias, [(hidden, targets)], block_rows)[0],
                           softmax, hidden)
    torch.testing.assert_close(ours[0], ref[0], rtol=1e-12, atol=1e-12)
    for name, a, b in zip(("hidden", "weight", "bias"), ours[1], ref[1]):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12, msg=name)


def test_training_uses_the_fused_loss_and_evaluation_the_plain_one():
    softmax, hidden, targets = _case()
    assert type(softmax.full_loss(hidden, targets).grad_fn).__name__ == "FusedSoftmaxLossBackward"
    softmax.requires_grad_(False)  # nothing to differentiate: the plain path
    assert softmax.full_loss(hidden.detach(), targets).grad_fn is None
    softmax.requires_grad_(True)
    with torch.no_grad():
        total = softmax.full_loss(hidden, targets, reduction="sum")
        mean = softmax.full_loss(hidden, targets)
    assert total.item() == pytest.approx(mean.item() * hidden.shape[0], rel=1e-6)  # evaluation sums in float32


@pytest.mark.parametrize("loss", ["full", "sampled"])
def test_bf16_autocast_runs_the_gemms_in_bf16_and_returns_float32(loss):
    softmax, hidden, targets = _case(torch.float32, rows=300, vocab=2000, dim=64)
    sampled = torch.randperm(2000)[:500]
    expected, target_expected = torch.rand(500) + 0.1, torch.rand(300) + 0.1

    def run():
        if loss == "full":
            return softmax.full_loss(hidden, targets)
        return softmax.sampled_loss(hidden, targets, sampled, expected, target_expected)

    ref = _loss_and_grads(run, softmax, hidden)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ours = _loss_and_grads(run, softmax, hidden)
    assert type(ours[0].grad_fn).__name__.startswith("Fused")
    assert ours[0].dtype == torch.float32 and all(g.dtype == torch.float32 for g in ours[1])
    assert ours[0].item() == pytest.approx(ref[0].item(), rel=1e-3)
    for a, b in zip(ours[1], ref[1]):
        assert (a - b).norm() / b.norm() < 2e-2  # bf16 operands: about 3 significant digits


def test_bf16_in_blocks_of_uneven_size():
    softmax, hidden, targets = _case(torch.float32, rows=300, vocab=2000, dim=64)
    ref = _loss_and_grads(lambda: F.cross_entropy(F.linear(hidden, softmax.weight, softmax.bias), targets),
                          softmax, hidden)
    run = lambda: fused_loss(softmax.weight, softmax.bias, [(hidden, targets)], 128, torch.bfloat16)[0]  # noqa: E731
    ours = _loss_and_grads(run, softmax, hidden)  # blocks of 128, 128 and 44 rows
    assert ours[0].item() == pytest.approx(ref[0].item(), rel=1e-3)
    for a, b in zip(ours[1], ref[1]):
        assert (a - b).norm() / b.norm() < 2e-2


def _sampled_reference(softmax, hidden, targets, sampled, log_expected, target_log_expected):
    """TF's sampled_softmax_loss written out with autograd: true logit first, accidental hits removed."""
    true = (hidden * softmax.weight[targets]).sum(-1) + softmax.bias[targets] - target_log_expected
    logits = hidden @ softmax.weight[sampled].T + softmax.bias[sampled] - log_expected
    logits = logits.masked_fill(targets.unsqueeze(1) == sampled.unsqueeze(0), float("-inf"))
    return (torch.logsumexp(torch.cat([true.unsqueeze(1), logits], 1), 1) - true).mean()


@pytest.mark.parametrize("block_rows", [1, 5, 512])
@pytest.mark.parametrize("n_sampled", [20, 1])
def test_fused_sampled_loss_equals_tf_sampled_softmax_with_its_gradients(block_rows, n_sampled):
    """With one negative, the rows whose target it is have no candidate but their target: loss and gradients 0."""
    softmax, hidden, targets = _case()
    # distinct ids; some rows' targets are among them (accidental hits)
    sampled = torch.randperm(50)[:20] if n_sampled > 1 else targets[:1].clone()
    assert bool((targets.unsqueeze(1) == sampled).any())
    log_expected = torch.rand(n_sampled, dtype=torch.float64).log()
    target_log_expected = torch.rand(37, dtype=torch.float64).log()
    args = (targets, sampled, log_expected, target_log_expected)
    ref = _loss_and_grads(lambda: _sampled_reference(softmax, hidden, *args), softmax, hidden)
    ours = _loss_and_grads(lambda: fused_loss(softmax.weight, softmax.bias, [(hidden, *args)], block_rows)[0],
                           softmax, hidden)
    torch.testing.assert_close(ours[0], ref[0], rtol=1e-12, atol=1e-12)
    for name, a, b in zip(("hidden", "weight", "bias"), ours[1], ref[1]):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12, msg=name)


def test_sparse_weight_gradient_holds_the_dense_one():
    """Softmax(sparse=True): the weight gradient holds the touched rows (negatives of both parts and targets, some
    words several times over), each word once with its summed rows; it is the dense gradient, and the rest of the
    gradients are unchanged."""
    softmax, hidden, targets = _case()
    other = torch.randn(23, hidden.shape[1], dtype=hidden.dtype, requires_grad=True)
    negatives = [torch.randperm(50)[:20], torch.randperm(50)[:15]]
    parts = [(hidden, targets, negatives[0], torch.rand(20, dtype=hidden.dtype), torch.rand(37, dtype=hidden.dtype)),
             (other, targets[:23], negatives[1], torch.rand(15, dtype=hidden.dtype),
              torch.rand(23, dtype=hidden.dtype))]
    grads = {}
    for sparse in (False, True):
        softmax.sparse = sparse
        loss, _ = softmax.sampled_losses(parts)
        grads[sparse] = torch.autograd.grad(loss * 3.5, [softmax.weight, softmax.bias, hidden, other])
    dense, sparse = grads[False], grads[True]
    assert sparse[0].is_sparse and sparse[0].is_coalesced()  # one row per word, as the update needs them
    touched = torch.cat([negatives[0], negatives[1], targets]).unique()
    assert torch.equal(sparse[0].indices()[0], touched)
    torch.testing.assert_close(sparse[0].to_dense(), dense[0], rtol=1e-12, atol=1e-12)
    for a, b in zip(sparse[1:], dense[1:]):
        assert torch.equal(a, b)


def test_summed_rows_is_coalesce_of_the_concatenated_rows():
    torch.manual_seed(0)
    pieces = [(torch.randint(0, 40, (n,)), torch.randn(n, 3, dtype=torch.float64)) for n in (25, 0, 60)]
    got = summed_rows(pieces, torch.Size((40, 3)), torch.tensor(0.5, dtype=torch.float64))
    ids, rows = torch.cat([i for i, _ in pieces]), torch.cat([r for _, r in pieces])
    want = torch.sparse_coo_tensor(ids.unsqueeze(0), rows * 0.5, (40, 3), check_invariants=True).coalesce()
    assert got.is_coalesced() and torch.equal(got.indices(), want.indices())
    torch.testing.assert_close(got.values(), want.values(), rtol=1e-15, atol=1e-15)


def test_accidental_hits_are_the_pairs_where_a_target_was_sampled():
    torch.manual_seed(0)
    targets = torch.randint(0, 300, (1000,))
    sampled = torch.randperm(300)[:120]  # distinct, as the sampler draws them
    rows, columns = accidental_hits(targets, sampled, 300)
    expected = (targets.unsqueeze(1) == sampled.unsqueeze(0)).nonzero()  # (hits, 2), in row order
    assert torch.equal(rows, expected[:, 0]) and torch.equal(columns, expected[:, 1])
    assert 300 < rows.numel() < 500


@pytest.mark.parametrize("sampled", [False, True])
def test_two_parts_in_one_call_are_the_mean_of_each_part_alone(sampled):
    """The biLM's two directions share one call (one dense weight gradient): the same loss and gradients as the
    mean of two separate calls."""
    softmax, hidden, targets = _case()
    other = torch.randn(23, hidden.shape[1], dtype=hidden.dtype, requires_grad=True)  # a part of another size
    other_targets = torch.randint(0, 50, (23,))
    if sampled:
        negatives = [torch.randperm(50)[:20], torch.randperm(50)[:15]]
        parts = [(hidden, targets, negatives[0], torch.rand(20, dtype=hidden.dtype).log(),
                  torch.rand(37, dtype=hidden.dtype).log()),
                 (other, other_targets, negatives[1], torch.rand(15, dtype=hidden.dtype).log(),
                  torch.rand(23, dtype=hidden.dtype).log())]
    else:
        parts = [(hidden, targets), (other, other_targets)]
    both, each = fused_loss(softmax.weight, softmax.bias, parts, 8)
    separate = [fused_loss(softmax.weight, softmax.bias, [part], 8)[0] for part in parts]
    torch.testing.assert_close(each, torch.stack(separate).detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(both, 0.5 * (separate[0] + separate[1]), rtol=1e-12, atol=1e-12)
    assert each.grad_fn is None and not each.requires_grad  # for logging only
    inputs = [hidden, other, softmax.weight, softmax.bias]
    ours = torch.autograd.grad(both * 3.5, inputs)
    ref = torch.autograd.grad(0.5 * (separate[0] + separate[1]) * 3.5, inputs)
    for a, b in zip(ours, ref):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_a_second_backward_through_the_fused_loss_is_refused():
    softmax, hidden, targets = _case()
    loss = softmax.full_loss(hidden, targets)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="backpropagated only once"):
        loss.backward()


@pytest.mark.parametrize("negatives", [None, 8, 1])
def test_compiled_blocks_give_the_eager_losses_and_gradients(negatives):
    """``compile``: each block's elementwise work through torch.compile, the same values as the eager
    blocks (float64 here; blocks of 16 and 5 rows): full softmax, sampled with an accidental hit, and sampled with
    one negative, which leaves the rows whose target it is no candidate at all."""
    from elmo.modules import compiled as compiled_module
    from elmo.modules.softmax_loss import softmax_block

    softmax, hidden, targets = _case(rows=21)
    if negatives is None:
        parts = [(hidden, targets)]
    else:
        others = torch.tensor([t for t in range(50) if t not in targets.tolist()][: negatives - 1], dtype=torch.long)
        sampled = torch.cat([targets[:1], others])  # targets[0]: an accidental hit in row 0 (and any repeat of it)
        parts = [(hidden, targets, sampled, torch.rand(negatives, dtype=hidden.dtype).log(),
                  torch.rand(21, dtype=hidden.dtype).log())]
    eager = _loss_and_grads(lambda: fused_loss(softmax.weight, softmax.bias, parts, 16)[0], softmax, hidden)
    with compile_setting(True):
        ours = _loss_and_grads(lambda: fused_loss(softmax.weight, softmax.bias, parts, 16)[0], softmax, hidden)
    assert compiled_module.compiled(softmax_block)  # compiled for real, no fallback
    torch.testing.assert_close(ours[0], eager[0], rtol=1e-12, atol=1e-12)
    for name, a, b in zip(("hidden", "weight", "bias"), ours[1], eager[1]):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12, msg=name)


def test_compiled_blocks_in_bf16_match_the_eager_ones():
    softmax, hidden, targets = _case(torch.float32, rows=300, vocab=2000, dim=64)

    def run(compiled):
        with compile_setting(compiled):
            return fused_loss(softmax.weight, softmax.bias, [(hidden, targets)], 128, torch.bfloat16)[0]

    eager, ours = _loss_and_grads(lambda: run(False), softmax, hidden), _loss_and_grads(lambda: run(True), softmax,
                                                                                          hidden)
    assert ours[0].item() == pytest.approx(eager[0].item(), rel=1e-6)
    for a, b in zip(ours[1], eager[1]):
        assert a.dtype == torch.float32 and (a - b).norm() / b.norm() < 1e-5
