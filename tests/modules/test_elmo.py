from __future__ import annotations

import pytest
import torch

from elmo.modules.elmo import Elmo
from elmo.text.char_encoding import batch_to_ids
from tests.conftest import random_bilm

SENTENCES = [["I", "went", "to", "the", "bank", "."], ["Rivers", "have", "banks"]]


def test_representation_is_the_mix_of_the_biLM_layers_without_boundaries():
    bilm = random_bilm()
    elmo = Elmo(bilm, num_output_representations=2, dropout=0.0)
    with torch.no_grad():
        elmo.scalar_mixes[1].scalar_parameters.copy_(torch.tensor([1.0, -1.0, 0.5]))
        out = elmo(batch_to_ids(SENTENCES))
        layers = bilm(batch_to_ids(SENTENCES, add_sentence_boundaries=True)).layers
    assert out.mask.tolist() == [[True] * 6, [True] * 3 + [False] * 3]
    w = torch.softmax(torch.tensor([1.0, -1.0, 0.5]), 0)
    for b, sentence in enumerate(SENTENCES):
        n = len(sentence)
        uniform = sum(x[b, 1 : n + 1] for x in layers) / 3
        weighted = sum(wi * x[b, 1 : n + 1] for wi, x in zip(w, layers))
        torch.testing.assert_close(out.representations[0][b, :n], uniform)
        torch.testing.assert_close(out.representations[1][b, :n], weighted)
    assert out.representations[0][1, 3:].eq(0).all()


def test_keep_sentence_boundaries():
    elmo = Elmo(random_bilm(), dropout=0.0, keep_sentence_boundaries=True)
    out = elmo(batch_to_ids(SENTENCES))
    assert out.representations[0].shape == (2, 8, 16) and out.mask.sum().item() == 6 + 2 + 3 + 2


def test_biLM_is_frozen_by_default_and_mix_parameters_train():
    elmo = Elmo(random_bilm(), dropout=0.0)
    elmo.train()
    assert not elmo.bilm.training
    loss = elmo(batch_to_ids(SENTENCES)).representations[0].sum()
    loss.backward()
    assert all(p.grad is None for p in elmo.bilm.parameters())
    assert elmo.scalar_mixes[0].scalar_parameters.grad is not None and elmo.scalar_mixes[0].gamma.grad is not None


def test_fine_tuning_the_biLM():
    elmo = Elmo(random_bilm(), dropout=0.0, requires_grad=True)
    elmo(batch_to_ids(SENTENCES)).representations[0].sum().backward()
    assert elmo.bilm.forward_lstm.layers[0].input_linearity.weight.grad is not None


def test_fixed_mix_parameters_are_frozen():
    elmo = Elmo(random_bilm(), dropout=0.0, scalar_mix_parameters=[-9e10, -9e10, 1.0])
    assert not any(p.requires_grad for p in elmo.parameters())
    with torch.no_grad():
        top = elmo.bilm(batch_to_ids(SENTENCES, add_sentence_boundaries=True)).layers[-1]
        out = elmo(batch_to_ids(SENTENCES)).representations[0]
    torch.testing.assert_close(out[0], top[0, 1:7])


def test_dropout_applies_in_training_only():
    elmo = Elmo(random_bilm(), dropout=0.5)
    ids = batch_to_ids(SENTENCES)
    elmo.eval()
    a, b = elmo(ids).representations[0], elmo(ids).representations[0]
    torch.testing.assert_close(a, b)
    elmo.train()
    dropped = elmo(ids).representations[0]
    assert (dropped == 0).sum() > (a == 0).sum()


def test_scalar_mix_penalty():
    elmo = Elmo(random_bilm(), num_output_representations=2)
    with torch.no_grad():
        elmo.scalar_mixes[0].scalar_parameters.copy_(torch.tensor([1.0, 2.0, 3.0]))
        elmo.scalar_mixes[1].scalar_parameters.copy_(torch.tensor([0.0, 0.0, 1.0]))
    assert elmo.scalar_mix_penalty(0.001).item() == pytest.approx(0.001 * (1 + 4 + 9 + 1))


def test_carry_elmo_differs_after_the_first_batch_and_resets():
    elmo = Elmo(random_bilm(), dropout=0.0, initial_state="carry")
    ids = batch_to_ids(SENTENCES)
    with torch.no_grad():
        first = elmo(ids).representations[0]
        second = elmo(ids).representations[0]
        elmo.reset_states()
        again = elmo(ids).representations[0]
    assert not torch.allclose(first, second)
    torch.testing.assert_close(first, again)


def test_warm_elmo_starts_every_batch_from_the_warm_state():
    from elmo.formats.warm_state import model_warm_state

    bilm = random_bilm()
    elmo = Elmo(bilm, dropout=0.0, initial_state="warm", warm_state=model_warm_state(bilm))
    zero = Elmo(bilm, dropout=0.0)
    ids = batch_to_ids(SENTENCES)
    with torch.no_grad():
        first, second = elmo(ids).representations[0], elmo(ids).representations[0]
        assert not torch.allclose(first, zero(ids).representations[0])
    torch.testing.assert_close(first, second)  # nothing carried
    with pytest.raises(ValueError, match="initial_state='warm' needs warm_state="):
        Elmo(random_bilm(), initial_state="warm")
    with pytest.raises(ValueError, match="initial_state must be one of zero, carry, warm; got 'hot'"):
        Elmo(random_bilm(), initial_state="hot")


def test_alignment_maps_each_representation_after_the_mix_as_x_times_W_transposed():
    """Aligned multilingual ELMo (Schuster et al. 2019): nn.Linear(bias=False) with weight W on the mix output."""
    bilm = random_bilm()
    w = torch.randn(16, 16, generator=torch.Generator().manual_seed(1))  # not symmetric: W and W.T differ
    plain = Elmo(bilm, num_output_representations=2, dropout=0.0)
    aligned = Elmo(bilm, num_output_representations=2, dropout=0.0, alignment=w)
    with torch.no_grad():
        for elmo in (plain, aligned):
            elmo.scalar_mixes[1].scalar_parameters.copy_(torch.tensor([1.0, -1.0, 0.5]))
        expected = plain(batch_to_ids(SENTENCES))
        out = aligned(batch_to_ids(SENTENCES))
    for x, y in zip(expected.representations, out.representations):
        by_hand = torch.einsum("btj,ij->bti", x, w)  # y_i = sum_j W_ij x_j
        torch.testing.assert_close(y, by_hand)
        assert not torch.allclose(y, x @ w)  # the orientation matters
    assert out.representations[0][1, 3:].eq(0).all()  # padding stays zero
    assert "alignment" not in aligned.state_dict()  # task checkpoints load with or without one


def test_alignment_on_layer_1_as_the_published_models_use_it():
    bilm = random_bilm()
    w = torch.randn(16, 16, generator=torch.Generator().manual_seed(2))
    elmo = Elmo(bilm, dropout=0.0, scalar_mix_parameters=[-9e10, 1, -9e10], alignment=w)
    with torch.no_grad():
        layer1 = bilm(batch_to_ids(SENTENCES, add_sentence_boundaries=True)).layers[1]
        out = elmo(batch_to_ids(SENTENCES)).representations[0]
    torch.testing.assert_close(out[0], layer1[0, 1:7] @ w.T)


@pytest.mark.parametrize("shape", [(16, 8), (8, 8), (16,)])
def test_alignment_of_the_wrong_shape_is_refused(shape):
    with pytest.raises(ValueError, match=r"alignment must be a float \(16, 16\) matrix"):
        Elmo(random_bilm(), alignment=torch.zeros(shape))
