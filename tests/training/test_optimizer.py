"""The clipped update: the same parameters and optimizer state as ``clip_grad_norm_`` followed by ``step()``."""

import copy

import pytest
import torch

from elmo.training.optimizer import FUSED_DEVICES, clipped_step, coalesced, gradient_norm, make_optimizer
from elmo.training.train_config import TrainConfig


def _model_with_gradients(scale: float) -> torch.nn.Module:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(7, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    (model(torch.randn(4, 7)).square().sum() * scale).backward()
    return model


@pytest.mark.parametrize("optimizer", ["adagrad", "adam"])
@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("scale", [1e-3, 1e3])  # inside the clip norm (no scaling) and far outside it
def test_clipped_step_matches_clip_grad_norm(optimizer, fused, scale):
    tc = TrainConfig(optimizer=optimizer, learning_rate=0.2)
    ours, theirs = _model_with_gradients(scale), _model_with_gradients(scale)
    opt_ours, opt_theirs = make_optimizer(ours.parameters(), tc), make_optimizer(theirs.parameters(), tc)
    for opt in (opt_ours, opt_theirs):
        for group in opt.param_groups:
            group["fused"] = fused
    for _ in range(3):  # the optimizer state carries the clipped gradients forward
        norm = gradient_norm(ours.parameters())
        expected = torch.nn.utils.clip_grad_norm_(theirs.parameters(), 1.0)
        assert norm.item() == pytest.approx(expected.item(), rel=1e-6)
        clipped_step(opt_ours, norm, 1.0)
        opt_theirs.step()
    for a, b in zip(ours.parameters(), theirs.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
    for a, b in zip(opt_ours.state.values(), opt_theirs.state.values()):
        for key in a:
            torch.testing.assert_close(a[key], b[key], rtol=1e-6, atol=1e-7)
    assert getattr(opt_ours, "grad_scale", None) is None  # no scale left behind for the next step


@pytest.mark.parametrize("optimizer", ["adagrad", "adam"])
def test_the_fused_kernel_only_where_pytorch_has_it(optimizer):
    """Fused Adagrad raises on CUDA parameters at the first step (seen on an H200, torch 2.11): the table says so,
    and every device the table names builds a fused optimizer that steps."""
    assert FUSED_DEVICES == {"adam": {"cpu", "cuda"}, "adagrad": {"cpu"}}
    tc = TrainConfig(optimizer=optimizer)
    model = _model_with_gradients(1.0)
    opt = make_optimizer(model.parameters(), tc)
    assert opt.param_groups[0]["fused"] is True
    opt.step()
    meta = make_optimizer([torch.nn.Parameter(torch.zeros(2, device="meta"))], tc)  # no fused kernel there
    assert not meta.param_groups[0]["fused"]


def test_gradient_norm_skips_parameters_without_gradients():
    model = _model_with_gradients(1.0)
    frozen = copy.deepcopy(model)
    for p in frozen.parameters():
        p.grad = None
    params = [*model.parameters(), *frozen.parameters()]
    assert gradient_norm(params).item() == pytest.approx(
        torch.nn.utils.clip_grad_norm_(list(model.parameters()), 1e9).item(), rel=1e-6)
    assert gradient_norm(frozen.parameters()).item() == 0.0


class _Lookup(torch.nn.Module):
    """An embedding (sparse or dense gradient, rows repeated in the batch) feeding a dense layer."""

    def __init__(self, sparse: bool) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.embedding = torch.nn.Embedding(30, 6, sparse=sparse)
        self.linear = torch.nn.Linear(6, 2)

    def loss(self, ids: torch.Tensor, scale: float) -> torch.Tensor:
        return self.linear(self.embedding(ids)).square().sum() * scale


@pytest.mark.parametrize("scale", [1e-3, 1e3])
def test_sparse_gradients_take_adagrads_sparse_update_with_the_dense_result(scale):
    """Rows a step does not touch keep their weights and accumulators, as the dense update leaves them; the touched
    ones get the same update (up to float rounding), clip included; the state dicts have one layout."""
    tc = TrainConfig(learning_rate=0.2)
    sparse, dense = _Lookup(sparse=True), _Lookup(sparse=False)
    opt_sparse, opt_dense = make_optimizer(sparse.parameters(), tc), make_optimizer(dense.parameters(), tc)
    generator = torch.Generator().manual_seed(0)
    for _ in range(4):
        ids = torch.randint(0, 12, (9,), generator=generator)  # rows 12-29 never touched; repeats within a batch
        for model, opt in ((sparse, opt_sparse), (dense, opt_dense)):
            opt.zero_grad()
            model.loss(ids, scale).backward()
        assert sparse.embedding.weight.grad.is_sparse
        norm = gradient_norm(sparse.parameters())
        assert norm.item() == pytest.approx(gradient_norm(dense.parameters()).item(), rel=1e-6)
        clipped_step(opt_sparse, norm, 1.0)
        clipped_step(opt_dense, gradient_norm(dense.parameters()), 1.0)
    for a, b in zip(sparse.parameters(), dense.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
    assert torch.equal(sparse.embedding.weight[12:], dense.embedding.weight[12:])
    for a, b in zip(opt_sparse.state_dict()["state"].values(), opt_dense.state_dict()["state"].values()):
        assert a.keys() == b.keys() and torch.equal(a["step"], b["step"])
        torch.testing.assert_close(a["sum"], b["sum"], rtol=1e-6, atol=1e-7)


def test_sparse_gradients_need_adagrad():
    model = _Lookup(sparse=True)
    opt = make_optimizer(model.parameters(), TrainConfig(optimizer="adam"))
    model.loss(torch.tensor([1, 2, 2]), 1.0).backward()
    with pytest.raises(ValueError, match="sparse gradients need Adagrad, not Adam"):
        clipped_step(opt, gradient_norm(model.parameters()), 1.0)


def test_coalesced_skips_the_sort_only_for_strictly_increasing_rows():
    values = torch.arange(12.0).view(4, 3)
    # strictly increasing rows without the coalesced flag, as autograd keeps the softmax loss's gradient
    ordered = torch.sparse_coo_tensor(torch.tensor([[1, 4, 5, 9]]), values, (10, 3), check_invariants=True)
    assert not ordered.is_coalesced()
    fast = coalesced(ordered)
    assert fast.is_coalesced() and fast._values().data_ptr() == ordered._values().data_ptr()  # no copy, no sort
    for rows in ([4, 1, 5, 9], [1, 4, 4, 9]):  # out of order, a repeated row
        grad = torch.sparse_coo_tensor(torch.tensor([rows]), values, (10, 3), check_invariants=True)
        got, want = coalesced(grad), grad.coalesce()
        assert got.is_coalesced() and torch.equal(got.to_dense(), want.to_dense())
