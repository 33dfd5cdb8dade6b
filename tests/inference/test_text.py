from __future__ import annotations

from inference.text import Detokenizer


def test_it_keeps_text_equal_to_decoding_every_id(tokenizer):
    ids = tokenizer.encode("Dosage: 3.5 mg — über 毫无疑问 done.")
    detok = Detokenizer()
    for i in ids:
        detok.append(tokenizer, i)
    assert detok.text == tokenizer.decode(ids)


def test_it_holds_back_a_token_that_ends_inside_a_character(tokenizer):
    ids = tokenizer.encode("毫")  # byte-level: unseen CJK char -> several byte tokens
    assert len(ids) > 1
    detok = Detokenizer()
    deltas = [detok.append(tokenizer, i)[1] for i in ids]
    assert deltas[:-1] == [""] * (len(ids) - 1) and deltas[-1] == "毫"


def test_it_truncates_back_to_a_clean_prefix(tokenizer):
    ids = tokenizer.encode("Hello world, 毫 hello model.")
    detok = Detokenizer()
    detok.extend(tokenizer, ids)
    for n in range(len(ids) + 1):
        copy = Detokenizer.from_dict(list(ids), detok.to_dict())
        copy.truncate(n)
        assert tokenizer.decode(ids[: copy.emitted]) == copy.text
        copy.extend(tokenizer, ids[n:])
        assert copy.text == detok.text


def test_it_maps_a_char_to_a_clean_cut(tokenizer):
    ids = tokenizer.encode("Hello world, 毫 hello model.")
    detok = Detokenizer()
    detok.extend(tokenizer, ids)
    for char in range(len(detok.text) + 1):
        keep, cut = detok.cut_for_char(char)
        assert cut <= char and tokenizer.decode(ids[:keep]) == detok.text[:cut]


def test_it_splits_the_text_into_the_pieces_a_stream_shows(tokenizer):
    ids = tokenizer.encode("Hello 毫 world.")
    detok, streamed = Detokenizer(), []
    for i in ids:
        streamed.append(detok.append(tokenizer, i)[1])
    assert detok.pieces() == streamed
    assert "".join(detok.pieces(3)) == detok.text[detok.starts[3] :]
    assert len(detok.pieces(3)) == len(ids) - 3
