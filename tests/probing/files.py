"""Tiny CoNLL-U and Senseval files, written by the probe tests and by the journeys (docs/probing.md)."""

from __future__ import annotations

TAGGED = [  # (form, UPOS, XPOS)
    [("the", "DET", "DT"), ("cat", "NOUN", "NN"), ("sat", "VERB", "VBD"), (".", "PUNCT", ".")],
    [("a", "DET", "DT"), ("dog", "NOUN", "NN"), ("ran", "VERB", "VBD")],
    [("the", "DET", "DT"), ("dog", "NOUN", "NN"), ("sat", "VERB", "VBD"), (".", "PUNCT", ".")],
    [("a", "DET", "DT"), ("cat", "NOUN", "NN"), ("ran", "VERB", "VBD"), (".", "PUNCT", ".")],
]


def conllu_text(sentences=TAGGED) -> str:
    blocks = []
    for i, sentence in enumerate(sentences):
        lines = [f"# sent_id = {i}"]
        lines += [f"{j}\t{form}\t{form}\t{upos}\t{xpos}\t_\t0\tdep\t_\t_" for j, (form, upos, xpos) in
                  enumerate(sentence, start=1)]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n\n"


def senseval_text(word: str = "line-n", n: int = 10) -> str:
    """``n`` instances of ``word``, senses alternating between "cord" and "text"."""
    out = ['<corpus lang="en">', "", f'<lexelt item="{word}">', ""]
    for i in range(n):
        sense = ("cord", "text")[i % 2]
        context = "pull the" if sense == "cord" else "read the"
        out += [f'<instance id="{word}.{i}:">', f'<answer instance="{word}.{i}:" senseid="{sense}"/>', "<context>",
                " ".join(f'<wf pos="X">{w}</wf>' for w in context.split())
                + ' <head> <wf pos="NN">line</wf></head> <wf pos=\'"\'>&amp;</wf> <s snum="1"/> more',
                "</context>", "</instance>", ""]
    return "\n".join(out + ["</lexelt>", "</corpus>", ""])
