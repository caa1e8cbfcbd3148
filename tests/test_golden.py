"""The golden-file switch means the same in every test: only I6_SHARD_UPDATE_GOLDEN=1 rewrites;
unset, "0", "" or anything else compares (and fails on a difference, leaving the file as it was)."""

import pytest

from .golden import UPDATE_ENV, check_golden


@pytest.mark.parametrize("value", [None, "0", "", "true", "yes", "1 ", "01", "2"])
def test_anything_but_exactly_1_compares(tmp_path, monkeypatch, value):
    if value is None:
        monkeypatch.delenv(UPDATE_ENV, raising=False)
    else:
        monkeypatch.setenv(UPDATE_ENV, value)
    golden = tmp_path / "out.txt"
    golden.write_bytes(b"old\n")
    check_golden("out.txt", "old\n", golden_dir=str(tmp_path))
    with pytest.raises(AssertionError, match=f"out.txt changed; if intended, rerun with {UPDATE_ENV}=1"):
        check_golden("out.txt", "new\n", golden_dir=str(tmp_path))
    assert golden.read_bytes() == b"old\n"
    with pytest.raises(AssertionError, match=f"is missing; create it with {UPDATE_ENV}=1"):
        check_golden("missing.txt", "x", golden_dir=str(tmp_path))
    assert not (tmp_path / "missing.txt").exists()


def test_1_rewrites_and_creates(tmp_path, monkeypatch):
    monkeypatch.setenv(UPDATE_ENV, "1")
    (tmp_path / "out.txt").write_bytes(b"old\n")
    check_golden("out.txt", "new ü\n", golden_dir=str(tmp_path))
    check_golden("created.txt", "a\r\nb", golden_dir=str(tmp_path))
    assert (tmp_path / "out.txt").read_bytes() == "new ü\n".encode("utf-8")
    assert (tmp_path / "created.txt").read_bytes() == b"a\r\nb"  # written as given, no newline translation


def test_comparison_is_byte_for_byte(tmp_path, monkeypatch):
    monkeypatch.delenv(UPDATE_ENV, raising=False)
    (tmp_path / "crlf.txt").write_bytes(b"a\r\nb\r\n")
    with pytest.raises(AssertionError, match="crlf.txt changed"):
        check_golden("crlf.txt", "a\nb\n", golden_dir=str(tmp_path))  # text mode would have hidden the \r
    check_golden("crlf.txt", "a\r\nb\r\n", golden_dir=str(tmp_path))
