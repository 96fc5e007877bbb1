"""liftpy's disk cache of derived data: read back only when its key and its folder are right, never an error."""

import os
from pathlib import Path

import pytest

import liftpy._cache as cache
from liftpy._paths import data_dir
from liftpy.rewrite.reader import read_rules


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("LIFTPY_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def counted(value):
    calls = []

    def derive():
        calls.append(1)
        return value

    return derive, calls


def test_a_value_is_derived_once_and_again_for_other_text_or_other_code(folder, monkeypatch):
    derive, calls = counted({"a": [1, 2]})
    assert cache.remembered("t", "text", derive) == {"a": [1, 2]}
    assert cache.remembered("t", "text", derive) == {"a": [1, 2]}
    assert len(calls) == 1
    cache.remembered("t", "other text", derive)
    assert len(calls) == 2
    monkeypatch.setattr(cache, "code_fingerprint", lambda: "an edited liftpy")
    cache.remembered("t", "text", derive)
    assert len(calls) == 3


def test_an_entry_others_may_write_or_a_broken_one_is_not_read(folder):
    derive, calls = counted("value")
    cache.remembered("t", "text", derive)
    (entry,) = (folder / "t").iterdir()
    os.chmod(folder / "t", 0o777)
    assert cache.remembered("t", "text", derive) == "value" and len(calls) == 2
    os.chmod(folder / "t", 0o700)
    entry.write_bytes(b"not a pickle")
    os.chmod(entry, 0o600)
    assert cache.remembered("t", "text", derive) == "value" and len(calls) == 3


def test_a_cache_that_cannot_be_written_is_no_error(tmp_path, monkeypatch):
    blocker = tmp_path / "a file"
    blocker.write_text("")
    monkeypatch.setenv("LIFTPY_CACHE", str(blocker / "below a file"))
    derive, calls = counted(7)
    assert cache.remembered("t", "text", derive) == 7
    assert cache.remembered("t", "text", derive) == 7 and len(calls) == 2


def test_the_rules_read_through_the_cache_are_the_rules_of_the_files(folder):
    from liftpy.rewrite.rules import TextRule, load_file

    def text_rules(catalogue):
        return [(r.rule_name, r.lhs, r.rhs, r.conditions) for r in catalogue.values() if isinstance(r, TextRule)]

    for path in sorted(Path(str(data_dir("rewrites"))).glob("*.rules")):
        fresh = [(s.name, s.lhs, s.rhs, s.conditions) for s in read_rules(path.read_text(), str(path))]
        first = load_file(path)  # derived, and written to the cache
        assert len(list((folder / "rules").iterdir())) >= 1
        again = load_file(path)  # read back
        assert text_rules(again) == text_rules(first) == fresh


def test_the_grammar_read_through_the_cache_parses_as_the_grammar(folder):
    from liftpy import syntax

    text = (Path(__file__).resolve().parent.parent / "examples" / "programs" / "matmul.lift").read_text()
    try:
        syntax._parser.cache_clear()
        with pytest.MonkeyPatch.context() as patch:  # a parser made with no cache at all
            patch.setattr(cache, "entry", lambda kind, text: None)
            fresh = syntax._parser().parse(text, start="start")
        assert not (folder / "grammar").exists()
        syntax._parser.cache_clear()
        syntax._parser()  # made, and its tables written
        assert len(list((folder / "grammar").iterdir())) == 1
        syntax._parser.cache_clear()
        assert syntax._parser().parse(text, start="start") == fresh  # read back
    finally:
        syntax._parser.cache_clear()


def test_a_kind_keeps_its_newest_entries(folder):
    for i in range(cache.KEPT + 5):
        cache.remembered("t", f"text {i}", lambda: i)
    assert len(list((folder / "t").glob("*.pickle"))) == cache.KEPT
    derive, calls = counted("newest")
    assert cache.remembered("t", f"text {cache.KEPT + 4}", derive) == cache.KEPT + 4 and not calls
