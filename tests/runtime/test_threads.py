from __future__ import annotations

import threading

import pytest
import torch

from elmo.runtime.threads import gemm_threads, side_by_side, small_ops_on_one_thread


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
    assert name_a == threading.current_thread().name and name_b != name_a
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


def test_beside_threads_never_share_a_gemm(two_threads):
    def threads_for_a_big_gemm():
        with gemm_threads(10**12):
            return torch.get_num_threads()

    with small_ops_on_one_thread("cpu"):
        assert threads_for_a_big_gemm() == 2  # alone, a big GEMM takes both threads
        assert side_by_side(threads_for_a_big_gemm, threads_for_a_big_gemm) == [1, 1]
