import pytest
import torch

from elmo.modules.dropout import VariationalDropout, sequence_dropout


def test_one_mask_per_row_shared_by_all_time_steps():
    torch.manual_seed(0)
    drop = VariationalDropout(0.4).train()
    out = drop(torch.ones(8, 30, 64))  # (B, T, D)
    assert torch.equal(out, out[:, :1].expand_as(out))  # the same units dropped at every step of a row
    assert out.unique().tolist() == pytest.approx([0.0, 1 / 0.6])  # kept units scaled by 1 / (1 - p)
    assert not torch.equal(out[0, 0], out[1, 0])  # rows draw their own masks
    assert 0.3 < (out[:, 0] == 0).float().mean().item() < 0.5


def test_gradient_flows_through_the_kept_units_only():
    drop = VariationalDropout(0.5).train()
    x = torch.randn(3, 4, 6, requires_grad=True)
    out = drop(x)
    out.sum().backward()
    assert torch.equal(x.grad, (out != 0).float() * 2.0)


def test_identity_in_eval_mode_and_at_zero():
    x = torch.randn(2, 3, 4)
    assert VariationalDropout(0.4).eval()(x) is x
    assert VariationalDropout(0.0).train()(x) is x


def test_choice_of_dropout_and_bad_probability():
    assert isinstance(sequence_dropout(0.1), torch.nn.Dropout)
    assert isinstance(sequence_dropout(0.1, variational=True), VariationalDropout)
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        VariationalDropout(1.0)
