from __future__ import annotations

import threading

import pytest
import torch

from elmo.runtime.side_by_side import side_by_side
from elmo.runtime.threads import set_process_threads, small_ops_on_one_thread


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def _where():
    return threading.current_thread().name, torch.get_num_threads(), torch.is_grad_enabled()


def test_outside_the_one_thread_block_the_calls_run_in_order_in_the_callers_thread(two_threads):
    seen = side_by_side(_where, _where)
    assert seen == [(threading.current_thread().name, 2, True)] * 2


def test_inside_it_each_call_gets_a_thread_and_one_core_and_the_callers_grad_mode(two_threads):
    with small_ops_on_one_thread("cpu"), torch.no_grad():
        (name_a, threads_a, grad_a), (name_b, threads_b, grad_b) = side_by_side(_where, _where)
        assert torch.get_num_threads() == 1
    assert len({name_a, name_b, threading.current_thread().name}) == 3  # the caller's thread waits
    assert threads_a == threads_b == 1 and not grad_a and not grad_b
    assert torch.get_num_threads() == 2


def test_inference_mode_is_carried_into_the_other_thread(two_threads):
    with small_ops_on_one_thread("cpu"), torch.inference_mode():
        made = side_by_side(lambda: torch.ones(2) * 2, lambda: torch.ones(2) * 3)
    assert all(t.is_inference() for t in made)


def test_more_calls_than_threads_run_one_after_the_other(two_threads):
    with small_ops_on_one_thread("cpu"):
        names = {name for name, *_ in side_by_side(_where, _where, _where)}
    assert names == {threading.current_thread().name}


def test_an_error_in_the_other_thread_reaches_the_caller(two_threads):
    def fails():
        raise ValueError("from the second call")

    with small_ops_on_one_thread("cpu"), pytest.raises(ValueError, match="from the second call"):
        side_by_side(_where, fails)


class Seen(torch.Tensor):
    """A tensor that notes the thread count each matrix product of it runs with (it sees the call after the policy
    set the count for it)."""

    seen = threading.local()  # .threads: per Python thread, as side_by_side runs them at once

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.matmul, torch.Tensor.addmm_):
            cls.seen.threads.append(torch.get_num_threads())
        return super().__torch_function__(func, types, args, kwargs or {})


def _threads_of(product) -> int:
    Seen.seen.threads = []
    product()
    (threads,) = Seen.seen.threads
    return threads


BIG = 64_000_000  # multiply-adds: 32M per thread for two threads


def _big_product() -> int:
    return _threads_of(lambda: torch.matmul(torch.ones(2000, 4000).as_subclass(Seen), torch.ones(4000, 8)))


def _small_product() -> int:
    return _threads_of(lambda: torch.matmul(torch.ones(20, 40).as_subclass(Seen), torch.ones(40, 8)))


def test_inside_the_policy_only_big_products_get_the_callers_threads(two_threads):
    assert 2000 * 4000 * 8 == BIG
    with small_ops_on_one_thread("cpu"):
        assert (_big_product(), _small_product(), torch.get_num_threads()) == (2, 1, 1)
    assert (_big_product(), _small_product()) == (2, 2)  # outside it: torch as it was set


def test_a_product_into_a_block_of_columns_counts_the_whole_matrix(two_threads):
    """The LSTM's gate products run a block of output columns at a time; the blocks share or not as the product."""
    wide = torch.zeros(100, 16384)  # 100 x 64 x 16384 = 105M multiply-adds in all; a block of 64 columns: 0.4M
    rows, weight = torch.ones(100, 64).as_subclass(Seen), torch.ones(64, 64)
    with small_ops_on_one_thread("cpu"):
        assert _threads_of(lambda: wide[:, :64].addmm_(rows, weight)) == 2
        assert _threads_of(lambda: torch.zeros(100, 64).addmm_(rows, weight)) == 1


def test_beside_threads_never_share_a_product(two_threads):
    with small_ops_on_one_thread("cpu"):
        assert side_by_side(_big_product, _big_product) == [1, 1]


def test_the_process_thread_count_is_set_in_one_place(two_threads):
    set_process_threads(0)  # a share of the cores that rounds to none still gets one
    assert torch.get_num_threads() == 1
    set_process_threads(3)
    assert torch.get_num_threads() == 3
