"""Training data: row packing (layout, continuation, backward stream), shuffling, exact resume, file errors."""

from __future__ import annotations

import gzip

import pytest

from elmo.errors import InputFileError
from elmo.text.vocab import Vocabulary
from elmo.training.corpus import SentenceStream, expand_shards, load_shard
from elmo.training.windows import PackerState, RowPacker, windows_to_batch


def _corpus(tmp_path, lines, name="c.txt"):
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_rows_are_independent_streams_that_continue_across_batches(tmp_path):
    path = _corpus(tmp_path, ["a b c", "d", "e f"])
    stream = SentenceStream([path], shuffle=False)
    packer = RowPacker(stream, batch_size=2, unroll_steps=3)
    fwd, bwd = packer.next_windows()
    # Row 0 takes sentence 0 (<S> a b c </S>: 4 inputs, 3 fit); row 1 takes sentences 1 and 2.
    assert fwd[0] == [("<S>", "a"), ("a", "b"), ("b", "c")]
    assert fwd[1] == [("<S>", "d"), ("d", "</S>"), ("<S>", "e")]
    # The backward stream reads the same sentences reversed: </S> c b a <S>.
    assert bwd[0] == [("</S>", "c"), ("c", "b"), ("b", "a")]
    assert bwd[1] == [("</S>", "d"), ("d", "<S>"), ("</S>", "f")]
    fwd, bwd = packer.next_windows()
    assert fwd[0][0] == ("c", "</S>")  # the rest of sentence 0 continues in row 0
    assert bwd[0][0] == ("a", "<S>")
    assert fwd[1][:2] == [("e", "f"), ("f", "</S>")]


def test_single_pass_drops_the_incomplete_last_batch(tmp_path):
    path = _corpus(tmp_path, ["a b", "c"])
    packer = RowPacker(SentenceStream([path], shuffle=False, loop=False), batch_size=1, unroll_steps=2)
    # 5 inputs in all (<S> a b | <S> c): two full windows of 2, then one input left over.
    assert packer.next_windows() is not None
    assert packer.next_windows()[0] == [[("b", "</S>"), ("<S>", "c")]]
    assert packer.next_windows() is None


def test_batch_tensors_targets_and_chars(tmp_path):
    vocab = Vocabulary(["<S>", "</S>", "<UNK>", "a", "b"])
    path = _corpus(tmp_path, ["a b zzz"])
    packer = RowPacker(SentenceStream([path], shuffle=False), batch_size=1, unroll_steps=4)
    batch = windows_to_batch(*packer.next_windows(), vocab, max_characters_per_token=50)
    assert batch.forward_targets.tolist() == [[3, 4, 2, 1]]  # zzz is OOV -> <UNK>; last target </S>
    assert batch.backward_targets.tolist() == [[2, 4, 3, 0]]
    words = batch.word_char_ids[batch.forward_index[0]]  # (T, W)
    assert words.shape == (4, 50) and words.min() >= 1  # +1 shifted, never the padding id
    assert words[0, 1].item() == 256 + 1  # <S> is [BOW, BOS, EOW, ...]
    assert words[3, 1:5].tolist() == [ord("z") + 1] * 3 + [259 + 1]  # OOV inputs keep their characters


def test_shuffling_is_deterministic_and_seeded(tmp_path):
    shards = [_corpus(tmp_path, [f"s{k} {i}" for i in range(20)], name=f"{k}.txt") for k in range(3)]

    def first(seed, n=60):
        stream = SentenceStream(shards, seed=seed)
        return [" ".join(stream.next_sentence()) for _ in range(n)]

    assert first(1) == first(1)
    assert first(1) != first(2)
    assert sorted(first(1)) == sorted(f"s{k} {i}" for k in range(3) for i in range(20))  # one epoch = every line once
    assert first(1, 120)[60:] != first(1)  # the next epoch has a new order


def test_resuming_from_a_saved_position_continues_exactly(tmp_path):
    shards = [_corpus(tmp_path, [" ".join(f"w{k}{i}" for _ in range(i % 7 + 1)) for i in range(15)], f"{k}.txt")
              for k in range(2)]
    whole = RowPacker(SentenceStream(shards, seed=3), batch_size=3, unroll_steps=4)
    expected = [whole.next_windows() for _ in range(30)]
    first = RowPacker(SentenceStream(shards, seed=3), batch_size=3, unroll_steps=4)
    got = [first.next_windows() for _ in range(11)]
    saved = PackerState.from_dict(first.state().to_dict())  # through JSON-able data
    resumed = RowPacker(SentenceStream(shards, seed=3), batch_size=3, unroll_steps=4, state=saved)
    got += [resumed.next_windows() for _ in range(19)]
    assert got == expected


def test_missing_shard_pattern(tmp_path):
    with pytest.raises(InputFileError, match="nothing.*matches no shard"):
        expand_shards(str(tmp_path / "nothing*.txt"))


def test_truncated_gzip_names_the_file(tmp_path):
    path = tmp_path / "t.txt.gz"
    data = gzip.compress(("hello world\n" * 2000).encode())
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputFileError, match=r"t\.txt\.gz: truncated gzip"):
        load_shard(path)


def test_non_utf8_line_names_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine line\nalso fine\nbad \xff byte\n")
    with pytest.raises(InputFileError, match=r"bad\.txt, line 3: not valid UTF-8"):
        load_shard(path)


def test_vocab_without_special_first_lines(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("<S>\n<UNK>\n</S>\nthe\n")
    with pytest.raises(InputFileError, match=r"vocab\.txt: line 2 must be </S>"):
        Vocabulary.from_file(path, require_special_tokens=True)


def test_blank_only_shards_are_an_error(tmp_path):
    path = _corpus(tmp_path, ["", "  "])
    with pytest.raises(InputFileError, match="contain no sentences"):
        SentenceStream([path]).next_sentence()


def test_a_byte_order_mark_is_not_part_of_the_first_word(tmp_path):
    shard, vocab = tmp_path / "bom.txt", tmp_path / "vocab.txt"
    shard.write_bytes("\ufeffthe cat\nsat\n".encode())
    vocab.write_bytes("\ufeff<S>\n</S>\n<UNK>\nthe\n".encode())  # as Notepad saves it
    assert load_shard(shard) == [["the", "cat"], ["sat"]]
    assert Vocabulary.from_file(vocab, require_special_tokens=True).index("the") == 3


def test_a_directory_is_not_a_shard(tmp_path):
    (tmp_path / "shards").mkdir()
    with pytest.raises(InputFileError, match=r"shards: is a directory, not a text file; give the files as a glob, "
                                             r"e.g. '.*shards/\*'$"):
        expand_shards(str(tmp_path / "shards"))


def test_training_refuses_a_corpus_it_could_read_only_once():
    with pytest.raises(InputFileError, match="^<stdin>: training reads its corpus once per epoch, so it cannot come"):
        SentenceStream(expand_shards("-"))
