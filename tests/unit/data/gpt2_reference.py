#!/usr/bin/python3
"""Reference GPT-2 byte-level BPE, written from the published algorithm (GPT-2's encoder.py):
the pre-tokenization regex (needs Debian's python3-regex for \\p{L} and \\p{N}), the
byte-to-unicode alphabet, and merges applied lowest rank first. It generates the expected ids
that the C++ tokenizer is tested against.

usage: gpt2_reference.py TOKENIZER_DIR INPUT_FILE OUTPUT_JSON

The output holds "ordinary" (the text as plain text, like encoder.py) and "special" (each literal
<|endoftext|> becomes the end-of-text token). Input bytes that are not valid UTF-8 are decoded
with errors="replace" (each maximal invalid subsequence becomes U+FFFD), which is what
`chimera prep --invalid-utf8 replace` does.
"""
import json
import sys

import regex

PATTERN = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
EOT = "<|endoftext|>"


def byte_alphabet():
    """Byte -> printable unicode character, as GPT-2 defines it."""
    keep = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
            list(range(ord("®"), ord("ÿ") + 1)))
    chars = keep[:]
    extra = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(keep, chars)}


class Encoder:
    def __init__(self, directory):
        with open(f"{directory}/encoder.json", encoding="utf-8") as f:
            self.encoder = json.load(f)
        with open(f"{directory}/vocab.bpe", encoding="utf-8") as f:
            lines = f.read().split("\n")[1:]
        merges = [tuple(line.split()) for line in lines if line]
        self.ranks = {pair: i for i, pair in enumerate(merges)}
        self.alphabet = byte_alphabet()
        self.cache = {}

    def bpe(self, token):
        if token in self.cache:
            return self.cache[token]
        word = list(token)
        while len(word) > 1:
            pairs = {(word[i], word[i + 1]) for i in range(len(word) - 1)}
            best = min(pairs, key=lambda p: self.ranks.get(p, float("inf")))
            if best not in self.ranks:
                break
            merged, i = [], 0
            while i < len(word):
                if i < len(word) - 1 and word[i] == best[0] and word[i + 1] == best[1]:
                    merged.append(best[0] + best[1])
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            word = merged
        self.cache[token] = word
        return word

    def encode_ordinary(self, text):
        ids = []
        for piece in PATTERN.findall(text):
            mapped = "".join(self.alphabet[b] for b in piece.encode("utf-8"))
            ids.extend(self.encoder[t] for t in self.bpe(mapped))
        return ids

    def encode_special(self, text):
        ids = []
        for i, part in enumerate(text.split(EOT)):
            if i > 0:
                ids.append(self.encoder[EOT])
            ids.extend(self.encode_ordinary(part))
        return ids


def main():
    directory, input_path, output_path = sys.argv[1:4]
    with open(input_path, "rb") as f:
        text = f.read().decode("utf-8", errors="replace")
    enc = Encoder(directory)
    result = {"ordinary": enc.encode_ordinary(text), "special": enc.encode_special(text)}
    with open(output_path, "w", encoding="utf-8") as f:
        json.dump(result, f)
        f.write("\n")


if __name__ == "__main__":
    main()
