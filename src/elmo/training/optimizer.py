"""The biLM's update: bilm-tf's optimizer and its global-norm gradient clip, with the clip folded into the update.

``clip_grad_norm_`` then ``optimizer.step()`` reads and writes every gradient once more just to scale it. A fused
optimizer can take the scale instead: PyTorch's fused Adagrad and Adam divide each gradient by
``optimizer.grad_scale`` inside their kernel (the hook AMP's ``GradScaler`` uses to unscale), so the clip costs only
the norm. The update is the one of ``clip_grad_norm_`` + ``step()``: gradients scaled by
min(1, max_norm / (norm + 1e-6)), up to the rounding of a division by the reciprocal instead of a multiplication.

A sparse gradient (the sampled softmax's, :class:`~elmo.modules.softmax.Softmax` ``sparse``) takes Adagrad's
sparse update instead, as TF applied it to bilm-tf's softmax: only its rows are read and written.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import torch

from elmo.training.train_config import TrainConfig

log = logging.getLogger(__name__)

# the devices PyTorch has a fused kernel for, per optimizer (torch 2.11-2.13: no fused Adagrad on CUDA)
FUSED_DEVICES = {"adam": {"cpu", "cuda"}, "adagrad": {"cpu"}}


def make_optimizer(parameters, tc: TrainConfig) -> torch.optim.Optimizer:
    """bilm-tf's Adagrad (eps 0, initial accumulator 1.0), or Adam for short runs on small corpora.

    Fused (one kernel for all parameters instead of several passes over each) where PyTorch has the fused kernel
    (:data:`FUSED_DEVICES`); elsewhere the multi-tensor path, and the clip scales the gradients first.
    """
    parameters = list(parameters)
    fused = {p.device.type for p in parameters} <= FUSED_DEVICES[tc.optimizer]
    if tc.optimizer == "adam":
        return torch.optim.Adam(parameters, lr=tc.learning_rate, fused=fused)
    return torch.optim.Adagrad(parameters, lr=tc.learning_rate, initial_accumulator_value=tc.initial_accumulator_value,
                               eps=0.0, fused=fused)


@torch.no_grad()
def seed_adagrad(
    optimizer: torch.optim.Optimizer, model: torch.nn.Module, accumulators: dict[str, torch.Tensor]
) -> None:
    """Start Adagrad from ``accumulators`` (parameter name -> sum of squared gradients so far) instead of
    ``initial_accumulator_value``: the state of a bilm-tf checkpoint, so that fine-tuning takes the steps the
    original run would have taken next. Parameters not named keep the initial value; Adam has no such state."""
    if not isinstance(optimizer, torch.optim.Adagrad):
        log.warning("the checkpoint's Adagrad accumulators are not used: the optimizer is %s",
                    type(optimizer).__name__)
        return
    parameters = dict(model.named_parameters())
    unknown = sorted(set(accumulators) - set(parameters))
    if unknown:
        raise ValueError(f"accumulator for unknown parameter '{unknown[0]}'")
    for name, value in accumulators.items():
        state = optimizer.state[parameters[name]]
        state["sum"].copy_(value.to(state["sum"].dtype))


@torch.no_grad()
def gradient_norm(parameters: Iterable[torch.Tensor]) -> torch.Tensor:
    """Global L2 norm of the parameters' gradients, float32 (0-d): what ``clip_grad_norm_`` returns.

    Sparse gradients (the softmax weight's, :class:`~elmo.modules.softmax.Softmax` ``sparse``) are coalesced in
    place first, as the update needs them: one backward hands them over coalesced, but gradients accumulated over
    micro-batches list a word once per micro-batch.
    """
    norms = []
    for p in parameters:
        if p.grad is None:
            continue
        if p.grad.is_sparse:
            p.grad = coalesced(p.grad)
        grad = p.grad.values() if p.grad.is_sparse else p.grad
        norms.append(torch.linalg.vector_norm(grad, dtype=torch.float32))
    return torch.linalg.vector_norm(torch.stack(norms)) if norms else torch.zeros(())


def coalesced(grad: torch.Tensor) -> torch.Tensor:
    """``grad.coalesce()`` of a sparse (V, P) gradient, without its sort when the row ids are already strictly
    increasing: the fused softmax loss hands its gradient over coalesced, but autograd drops the flag when it keeps
    the gradient as ``.grad``."""
    if grad.is_coalesced():
        return grad
    rows = grad._indices()
    if rows.shape[0] == 1 and bool((rows[0, 1:] > rows[0, :-1]).all()):
        return torch.sparse_coo_tensor(rows, grad._values(), grad.shape, is_coalesced=True, check_invariants=False)
    return grad.coalesce()


@torch.no_grad()
def clipped_step(optimizer: torch.optim.Optimizer, grad_norm: torch.Tensor, max_norm: float) -> None:
    """``optimizer.step()`` on the gradients clipped to global norm ``max_norm`` (``grad_norm``: their norm).

    Steps whose norm is within ``max_norm`` update with the gradients as they are. Parameters with sparse
    gradients take Adagrad's sparse update (:func:`sparse_adagrad_update`), the rest the optimizer's own.
    """
    scale = min(1.0, max_norm / (float(grad_norm) + 1e-6))
    sparse = [(p, group) for group in optimizer.param_groups for p in group["params"]
              if p.grad is not None and p.grad.is_sparse]
    if sparse and not isinstance(optimizer, torch.optim.Adagrad):
        raise ValueError(f"sparse gradients need Adagrad, not {type(optimizer).__name__}")
    grads = [p.grad for p, _ in sparse]
    for p, _ in sparse:
        p.grad = None  # skipped by the dense update
    try:
        _dense_step(optimizer, scale)
    finally:
        for (p, _), grad in zip(sparse, grads):
            p.grad = grad
    for (p, group), grad in zip(sparse, grads):
        sparse_adagrad_update(p, grad, optimizer.state[p], group, scale)


def _dense_step(optimizer: torch.optim.Optimizer, scale: float) -> None:
    """``optimizer.step()`` with every gradient scaled by ``scale`` <= 1: inside a fused optimizer's kernel."""
    if scale == 1.0:
        optimizer.step()
    elif all(group.get("fused") for group in optimizer.param_groups):
        device = optimizer.param_groups[0]["params"][0].device
        optimizer.grad_scale = torch.tensor(1.0 / scale, dtype=torch.float32, device=device)
        try:
            optimizer.step()
        finally:
            optimizer.grad_scale = None
    else:
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.grad.mul_(scale)
        optimizer.step()


@torch.no_grad()
def sparse_adagrad_update(param: torch.Tensor, grad: torch.Tensor, state: dict, group: dict,
                          scale: float = 1.0) -> None:
    """Adagrad on the rows of a sparse ``grad`` (times ``scale``) only, with ``torch.optim.Adagrad``'s state and
    hyper-parameters: TF's sparse apply, which bilm-tf's softmax got. The dense update gives the same rows the
    same values and leaves every other row as it is (it adds zero to their accumulator and subtracts zero from
    their weights), so the two differ only in float rounding, and checkpoints of either load into the other."""
    if group["weight_decay"] or group["lr_decay"] or group["maximize"]:
        raise ValueError("the sparse Adagrad update supports neither weight_decay, lr_decay nor maximize")
    grad = coalesced(grad)
    rows, values = grad.indices()[0], grad.values()  # (R,), (R, P)
    if scale != 1.0:
        values = values * scale
    state["step"] += 1
    state["sum"].index_add_(0, rows, values * values)
    std = state["sum"].index_select(0, rows).sqrt_().add_(group["eps"])
    # lr folded into the rows: index_add_'s CPU kernel has no fast path for alpha != 1
    param.index_add_(0, rows, values.div(std).mul_(-group["lr"]))
