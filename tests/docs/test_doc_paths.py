#!/usr/bin/python3
"""Every repository path the README and docs/*.md name in inline code exists.

A path is a word inside backticks whose first component is a top-level entry of the source tree
(`scripts/demo`, `./fuzz/run --ci`, `analysis/plot.py gantt`); `<name>` stands for any one
component and `{a,b}` for each alternative. Build and run outputs (`build/...`, `runs/...`,
`data/...`) are not checked. A bare test file name (`test_resume.cpp`) must name some file of the
tree; other bare names may be other projects' files (GPT-2's `encoder.py`).
Usage: test_doc_paths.py SOURCE_DIR
"""
import glob
import itertools
import os
import re
import sys
import unittest

SOURCE = None
INLINE_CODE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
SOURCE_KINDS = (".cpp", ".hpp", ".py", ".cmake")
# Outputs of building and running (ignored by git): whether they exist, and which of their
# paths do, depends on what ran in this checkout, e.g. runs/ without runs/demo/.
NOT_CHECKED = {"build", "runs", "data"}


def documents():
    return ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(
        os.path.join(SOURCE, "docs")) if f.endswith(".md"))


def prose(text):
    """The text outside fenced code blocks (commands there are tested by running them)."""
    kept, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            kept.append("")
            continue
        kept.append("" if fenced else line)
    return kept


def expand_braces(word):
    m = re.search(r"\{([^{}]*)\}", word)
    if not m:
        return [word]
    return list(itertools.chain.from_iterable(
        expand_braces(word[:m.start()] + alt + word[m.end():]) for alt in m.group(1).split(",")))


def exists(pattern):
    pattern = re.sub(r"<[^<>/]+>", "*", pattern)
    return any(glob.glob(os.path.join(SOURCE, p)) for p in expand_braces(pattern))


def named_paths(path):
    """(line, word, kind) for each repository path the document at `path` names."""
    tops = {e for e in os.listdir(SOURCE) if e not in NOT_CHECKED}
    with open(os.path.join(SOURCE, path), encoding="utf-8") as f:
        lines = prose(f.read())
    for number, line in enumerate(lines, 1):
        for code in INLINE_CODE.findall(line):
            for word in code.split():
                word = word.strip("\"'(),;:").removeprefix("./")
                word = word.split("=", 1)[-1] if word.startswith("--") else word
                if "/" in word and word.split("/")[0] in tops:
                    yield number, word.rstrip("."), "path"
                elif word.startswith("test_") and word.endswith(SOURCE_KINDS):
                    yield number, word, "file"


class DocumentedPathsExist(unittest.TestCase):
    def test_every_named_path_exists(self):
        basenames = set()
        for _, _, files in os.walk(SOURCE):
            basenames.update(files)
        missing, checked = [], 0
        for doc in documents():
            for number, word, kind in named_paths(doc):
                checked += 1
                ok = exists(word) if kind == "path" else word in basenames
                if not ok:
                    missing.append(f"{doc}:{number}: `{word}` does not exist")
        self.assertGreater(checked, 50, "the check found almost no paths: is the pattern broken?")
        self.assertEqual(missing, [], "\n" + "\n".join(missing))

    def test_the_check_sees_a_dead_path(self):
        self.assertFalse(exists("scripts/no-such-script"))
        self.assertTrue(exists("include/chimera/{comm,runtime}"))
        self.assertTrue(exists("src/<module>/CMakeLists.txt"))
        self.assertEqual(expand_braces("a/{b,c}/d"), ["a/b/d", "a/c/d"])


if __name__ == "__main__":
    SOURCE = os.path.abspath(sys.argv[1])
    unittest.main(argv=[sys.argv[0], "-v"])
