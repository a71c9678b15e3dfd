import pytest
import torch

from elmo.modules.dropout import Dropout, VariationalDropout, sequence_dropout


def test_one_mask_per_row_shared_by_all_time_steps():
    torch.manual_seed(0)
    drop = VariationalDropout(0.4).train()
    out = drop(torch.ones(8, 30, 64))  # (B, T, D)
    assert torch.equal(out, out[:, :1].expand_as(out))  # the same units dropped at every step of a row
    assert out.unique().tolist() == pytest.approx([0.0, 1 / 0.6])  # kept units scaled by 1 / (1 - p)
    assert not torch.equal(out[0, 0], out[1, 0])  # rows draw their own masks
    assert 0.3 < (out[:, 0] == 0).float().mean().item() < 0.5


def test_per_position_dropout_keeps_each_element_independently_with_probability_1_minus_p():
    torch.manual_seed(0)
    out = Dropout(0.4).train()(torch.ones(64, 35, 256))
    assert out.unique().tolist() == pytest.approx([0.0, 1 / 0.6])
    assert (out == 0).float().mean().item() == pytest.approx(0.4, abs=0.005)  # 573k draws: 3 sd is 0.002
    assert not torch.equal(out[:, 0], out[:, 1])  # positions draw their own masks
    assert out.mean().item() == pytest.approx(1.0, abs=0.01)  # expectation preserved


@pytest.mark.parametrize("dropout", [Dropout, VariationalDropout])
def test_gradient_flows_through_the_kept_units_only(dropout):
    drop = dropout(0.5).train()
    x = torch.randn(3, 4, 6, requires_grad=True)
    out = drop(x)
    out.sum().backward()
    assert torch.equal(x.grad, (out != 0).float() * 2.0)


@pytest.mark.parametrize("dropout", [Dropout, VariationalDropout])
def test_identity_in_eval_mode_and_at_zero(dropout):
    x = torch.randn(2, 3, 4)
    assert dropout(0.4).eval()(x) is x
    assert dropout(0.0).train()(x) is x


def test_choice_of_dropout_and_bad_probability():
    assert type(sequence_dropout(0.1)) is Dropout
    assert isinstance(sequence_dropout(0.1, variational=True), VariationalDropout)
    for dropout in (Dropout, VariationalDropout):
        with pytest.raises(ValueError, match=r"\[0, 1\)"):
            dropout(1.0)
