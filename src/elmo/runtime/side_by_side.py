"""Independent calls run side by side, one core each, where the CPU thread policy an entry point entered gives
exactly one core per call (:mod:`elmo.runtime.threads`): the biLM's two directions on a two-core machine.

The model code calls :func:`side_by_side` for work it knows to be independent; whether the calls run concurrently
is the policy's to say, so outside it (training, user code) they run one after the other, as plain calls.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import torch

from elmo.runtime.threads import beside_others, is_beside, policy_threads

T = TypeVar("T")


def side_by_side(*calls: Callable[[], T]) -> list[T]:
    """The calls' results, in order: run concurrently, each on a Python thread of its own and one core, inside the
    thread policy when it holds exactly one thread per call; one after the other otherwise (outside it, or another
    thread count). The caller's thread only waits: the policy's watch on matrix products holds in it, and costs a few
    microseconds per torch call there.

    Each call must only read shared tensors and write its own. Grad and inference mode are per Python thread in
    torch, so the caller's are carried into the others. The results equal the sequential ones up to GEMM summation
    order (MKL's differs between one and two threads: about 1e-7 relative).
    """
    if len(calls) < 2 or policy_threads() != len(calls) or is_beside():
        return [call() for call in calls]
    grad, inference = torch.is_grad_enabled(), torch.is_inference_mode_enabled()
    results: list = [None] * len(calls)
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            with beside_others(), torch.inference_mode(inference), torch.set_grad_enabled(grad):
                results[index] = calls[index]()
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,), name=f"elmo-side-{i}") for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results
