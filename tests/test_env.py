"""`neuronkit.env`: the one reader of environment variables."""

from __future__ import annotations

import pytest

from neuronkit import env


def test_flags_follow_the_spelling_each_owner_accepts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NK_TEST", " true ")
    assert not env.flag("NK_TEST")  # exactly "1" by default, as the runtime reads it
    assert env.flag("NK_TEST", true=env.TRUE_WORDS)
    assert env.flag("NK_TEST", False, false=env.FALSE_WORDS)
    monkeypatch.setenv("NK_TEST", "off")
    assert not env.flag("NK_TEST", True, false=env.FALSE_WORDS)
    monkeypatch.setenv("NK_TEST", "  ")
    assert env.flag("NK_TEST", True) and env.raw("NK_TEST") is None  # blank is unset


def test_words_texts_and_whole_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NK_TEST", raising=False)
    assert env.word("NK_TEST", "recompile") == "recompile" and env.whole("NK_TEST", 3) == 3
    monkeypatch.setenv("NK_TEST", " Pad ")
    assert env.word("NK_TEST", "x") == "pad" and env.text("NK_TEST") == "Pad"
    with pytest.raises(RuntimeError, match="Invalid NK_TEST value: Pad"):
        env.whole("NK_TEST", 0)
    assert env.snapshot(("NK_TEST", "NK_OTHER")) == {"NK_TEST": " Pad "}
