"""The build cache's size limit and `python -m qgpu cache`: listing, least-recently-used eviction,
hard links, locks, pruning by age and all, the CLI end to end. No model is built: artifacts come
from Stages.run with a producer writing files of known sizes; engine forms, native libraries and
tokenizers are fake files aged with os.utime."""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
from pathlib import Path

import pytest

from qgpu import cache as qcache
from qgpu.cache import (
    DEFAULT_CACHE_LIMIT_BYTES,
    LOCK_EXPIRE_S,
    cache_limit,
    format_size,
    parse_size,
    prune,
    scan,
    stage_lock_key,
)
from qgpu.cli import main
from qgpu.errors import UsageError
from qgpu.model.build import Stages

DAY = 86400
U = 64 * 2**20
"""An entry's size unit: far above the stage index's (its sqlite log grows by up to 4 MiB as it
is used, so limits here leave U/2 of slack); files are sparse, so U costs no disk."""
TINY = {"kind": "tiny", "params": {"hidden_size": 64}}
HUB = {"kind": "hub", "repo": "Qwen/Qwen3.5-2B", "commit": "0123456789abcdef" * 2 + "01234567"}


@pytest.fixture(autouse=True)
def _no_limit_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(qcache.LIMIT_ENV, raising=False)


def sparse(path: Path, size: int) -> Path:
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def producer(size: int, name: str = "model.safetensors"):
    def produce(target: Path) -> None:
        sparse(target / name, size)

    return produce


def age(path: Path, days: float) -> None:
    """Make `path` last used `days` ago (what a cache hit's touch would have left)."""
    t = time.time() - days * DAY
    os.utime(path, (t, t))


def merged(stages: Stages, size: int, sources: str, dtype: str = "bfloat16") -> Path:
    """A fake merged artifact of `size` bytes, built by code `sources`."""
    return stages.run("merged", {"base": "b", "circuit": "gpu", "dtype": dtype,
                                 "sources": sources}, producer(size),
                      inputs={"base": HUB, "circuit": "gpu", "dtype": dtype})


def fake_file(path: Path, size: int, days: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    sparse(path, size)
    age(path, days)
    return path


def index_bytes(root: Path) -> int:
    return sum(e.bytes for e in scan(root).entries if e.kind == "index")


def by_path(root: Path) -> dict[str, qcache.Entry]:
    return {str(e.path.relative_to(root)): e for e in scan(root).entries}


# --- sizes and the limit's setting -------------------------------------------------------------

@pytest.mark.parametrize("text,value", [
    ("20G", 20 * 2**30), ("500M", 500 * 2**20), ("1000", 1000), ("1000b", 1000),
    ("1.5GiB", 3 * 2**29), ("2GB", 2 * 10**9), ("4k", 4096), ("1T", 2**40), (" 40 g ", 40 * 2**30),
    ("0", None), ("0G", None), ("none", None), ("None", None), ("off", None), ("unlimited", None),
])
def test_parse_size(text: str, value: int | None) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["20X", "-1G", "", "G", "1e9", "20 GB extra", "0.1b", "9" * 400])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a size|less than a byte"):
        parse_size(text)


def test_cache_limit_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    assert cache_limit() == DEFAULT_CACHE_LIMIT_BYTES == 40 * 2**30
    monkeypatch.setenv("QGPU_CACHE_LIMIT", "20G")
    assert cache_limit() == 20 * 2**30
    monkeypatch.setenv("QGPU_CACHE_LIMIT", "none")
    assert cache_limit() is None
    monkeypatch.setenv("QGPU_CACHE_LIMIT", "0")
    assert cache_limit() is None
    monkeypatch.setenv("QGPU_CACHE_LIMIT", "")
    assert cache_limit() == DEFAULT_CACHE_LIMIT_BYTES
    monkeypatch.setenv("QGPU_CACHE_LIMIT", "lots")
    with pytest.raises(UsageError, match=r"\$QGPU_CACHE_LIMIT: 'lots' is not a size"):
        cache_limit()
    with pytest.raises(UsageError, match="QGPU_CACHE_LIMIT"):  # a build says so before working
        Stages(Path("/nonexistent-but-unused"))


def test_format_size() -> None:
    assert [format_size(n) for n in (0, 1023, 1024, 1536, 40 * 2**30, 13_200_000_000)] == [
        "0 B", "1023 B", "1 KiB", "1.5 KiB", "40 GiB", "12.3 GiB"]


# --- the listing -------------------------------------------------------------------------------

def test_scan_lists_every_kind_with_sizes_and_what_it_is(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    stages = Stages(root, limit=None)
    base = stages.run("base", {**TINY, "sources": "s"}, producer(1000))
    big = merged(stages, 3000, "v1")
    fake_file(root / "engine" / "e1.safetensors", 200, 2)
    fake_file(root / "engine" / "e1.1234.tmp", 50, 2)
    fake_file(root / "native" / "engine_native-abc.so", 300, 3)
    fake_file(root / "tokenizer" / "0123456789abcdef" / "tokenizer.json", 400, 4)
    fake_file(root / "schedules" / "cache.db", 600, 5)
    fake_file(root / "somebody-elses.txt", 7, 0)
    (root / "artifacts" / ".merged-half").mkdir()
    entries = by_path(root)
    assert {p: e.kind for p, e in entries.items()} == {
        f"artifacts/{base.name}": "artifact", f"artifacts/{big.name}": "artifact",
        "artifacts/.merged-half": "partial", "engine/e1.safetensors": "engine",
        "engine/e1.1234.tmp": "partial", "native/engine_native-abc.so": "native",
        "tokenizer/0123456789abcdef": "tokenizer", "schedules": "schedules", "stages": "index",
        "somebody-elses.txt": "other"}
    b, m = entries[f"artifacts/{base.name}"], entries[f"artifacts/{big.name}"]
    assert (b.bytes, b.frees, m.bytes, m.frees) == (1000, 1000, 3000, 3000)
    assert b.what.startswith("base: the tiny base (code ") and b.info["stage"] == "base"
    assert m.what.startswith("merged: gpu circuit, bfloat16, on Qwen/Qwen3.5-2B@0123456 (code ")
    assert m.info["inputs"] == {"base": HUB, "circuit": "gpu", "dtype": "bfloat16"}
    assert m.info["sources"] == "v1" and "torch" in m.info["libs"]
    assert entries["tokenizer/0123456789abcdef"].bytes == 400
    assert abs(entries["native/engine_native-abc.so"].last_used - (time.time() - 3 * DAY)) < 5
    found = scan(root)
    assert found.bytes == sum(e.bytes for e in found.entries) == found.frees
    assert found.entries[0].to_json(root)["path"] in entries
    assert scan(tmp_path / "nothing-here").entries == []
    assert not (tmp_path / "nothing-here").exists()  # listing creates nothing


def test_hard_linked_files_free_nothing_and_do_not_count(tmp_path: Path) -> None:
    """A published build links the artifact's files: removing the artifact frees nothing."""
    root = tmp_path / "cache"
    stages = Stages(root, limit=None)
    a = merged(stages, 5000, "v1")
    out = tmp_path / "build" / "merged"
    out.mkdir(parents=True)
    os.link(a / "model.safetensors", out / "model.safetensors")
    entry = by_path(root)[f"artifacts/{a.name}"]
    assert (entry.bytes, entry.frees) == (5000, 0)
    found = scan(root)
    assert found.bytes - found.frees == 5000
    age(a, 30)
    result = prune(root, limit=1)  # over any limit, yet removing it would not help
    assert a.is_dir() and result.removed == [] and result.over
    result = prune(root, older_than_s=DAY)  # asked by age: goes; the build keeps its copy
    assert not a.exists() and (out / "model.safetensors").stat().st_size == 5000
    assert [e.path for e in result.removed] == [a] and result.freed == 0


# --- the limit ---------------------------------------------------------------------------------

def test_a_build_over_the_limit_evicts_least_recently_used_first(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    stages = Stages(root, limit=None)
    oldest, older = merged(stages, U, "v1"), merged(stages, U, "v2", "float32")
    age(oldest, 10)
    age(older, 5)
    engine = fake_file(root / "engine" / "e.safetensors", U, 7)
    native = fake_file(root / "native" / "engine_native-a.so", U, 1)
    limit = index_bytes(root) + 3 * U + U // 2
    stages = Stages(root, limit=limit)  # a new build: 5 U of entries
    newest = stages.run("merged", {"base": "other", "circuit": "demo", "dtype": "bfloat16",
                                   "sources": "v3"}, producer(U))
    assert not oldest.exists() and not engine.exists()  # 10 days, then 7 days
    assert older.is_dir() and native.is_file() and newest.is_dir()
    assert scan(root).frees <= limit
    with Stages(root, limit=None).cache as index_cache:  # their manifests went with them
        paths = [m["path"] for k in index_cache.iterkeys() if isinstance(m := index_cache.get(k),
                                                                          dict)]
    assert sorted(paths) == sorted(f"artifacts/{p.name}" for p in (older, newest))


def test_the_entries_this_build_uses_are_never_evicted(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    old = merged(Stages(root, limit=None), 4000, "v0")
    age(old, 100)
    stages = Stages(root, limit=1)
    base = stages.run("base", {**TINY, "sources": "s"}, producer(2000))
    age(base, 50)  # older than `old` by use, yet this build's
    assert not old.exists()
    out = merged(stages, 3000, "v1")
    assert base.is_dir() and out.is_dir()
    result = prune(root, limit=1, keep=stages.used)
    assert result.removed == [] and result.over
    assert prune(root, limit=1).removed[0].path == base  # another process: LRU first
    # a later build of the evicted stage rebuilds it
    report: dict[str, dict] = {}
    Stages(root, limit=None).run("base", {**TINY, "sources": "s"}, producer(2000), report)
    assert report["base"]["cached"] is False


def test_a_build_counts_its_outputs_once_published(tmp_path: Path) -> None:
    """build() enforces the limit after publishing: the new artifact's files, linked into the
    output directory, then free nothing, so it does not push older entries out."""
    for defer in (False, True):
        root = tmp_path / f"cache-{defer}"
        old = merged(Stages(root, limit=None), U, "v1")
        age(old, 3)
        stages = Stages(root, limit=index_bytes(root) + U + U // 2)
        stages.defer_limit = defer
        new = merged(stages, 2 * U, "v2", "float32")  # other inputs: not superseded
        out = tmp_path / f"out-{defer}"
        out.mkdir()
        os.link(new / "model.safetensors", out / "model.safetensors")  # as _publish does
        stages.enforce_limit()
        assert old.is_dir() is defer and new.is_dir()


def test_a_stage_being_built_and_fresh_partial_writes_are_left_alone(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    stages = Stages(root, limit=None)
    a = merged(stages, 1000, "v1")
    age(a, 10)
    key = next(k for k in stages.cache.iterkeys() if str(k).startswith("merged:"))
    fresh = root / "artifacts" / ".merged-fresh"
    stale = root / "artifacts" / ".merged-stale"
    for partial in (fresh, stale):
        fake_file(partial / "model.safetensors", 500, 0)
    age(stale, (LOCK_EXPIRE_S + 60) / DAY)
    tmp = fake_file(root / "native" / "engine_native-a.123.tmp", 10, 0)
    with stages.cache.transact():
        assert stages.cache.add(stage_lock_key(key), None)  # as diskcache.Lock takes it
    result = prune(root, everything=True)
    assert a.is_dir() and [(e.path, why) for e, why in result.skipped] == [
        (a, "being built: its stage lock is held")]
    assert fresh.is_dir() and tmp.is_file() and not stale.exists()
    stages.cache.delete(stage_lock_key(key))
    prune(root, everything=True)
    assert not a.exists() and key not in stages.cache and fresh.is_dir()


def test_no_limit_removes_only_killed_builds_leftovers(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    stages = Stages(root, limit=None)
    a = merged(stages, 1000, "v1")
    age(a, 1000)
    stale = fake_file(root / "engine" / "x.99.tmp", 10, 1)
    result = prune(root, limit=None)
    assert [e.path for e in result.removed] == [stale] and a.is_dir()


# --- pruning by age, everything, dry runs -------------------------------------------------------

def test_prune_older_than_all_and_dry_run(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    stages = Stages(root, limit=None)
    a, b = merged(stages, 1000, "v1"), merged(stages, 1000, "v2")
    age(a, 40)
    engine = fake_file(root / "engine" / "e.safetensors", 100, 31)
    token = fake_file(root / "tokenizer" / "abc" / "tokenizer.json", 100, 2)
    age(token.parent, 2)
    schedules = fake_file(root / "schedules" / "cache.db", 100, 60)
    other = fake_file(root / "notes.txt", 5, 99)

    dry = prune(root, older_than_s=30 * DAY, dry_run=True)
    assert dry.dry_run and [e.path for e in dry.removed] == [a, engine]
    assert dry.freed == 1100 and a.is_dir() and engine.is_file()

    done = prune(root, older_than_s=30 * DAY)
    assert [e.path for e in done.removed] == [a, engine] and done.freed >= 1100
    assert not a.exists() and not engine.exists() and b.is_dir() and token.is_file()
    assert schedules.is_file()  # the schedules go with --all only

    prune(root, everything=True)
    assert not b.exists() and not token.parent.exists() and not schedules.parent.exists()
    assert other.is_file() and (root / "stages").is_dir()  # not qgpu's; the index stays
    assert [e.kind for e in scan(root).entries] == ["other", "index"]


# --- the command -------------------------------------------------------------------------------

def cli(*argv: str) -> tuple[int, dict]:
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main([*argv, "--json"])
    lines = stdout.getvalue().strip().splitlines()
    assert len(lines) == 1, stdout.getvalue()
    return code, json.loads(lines[0])


def test_cache_command_lists_and_prunes(tmp_path: Path, capsys,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "cache"
    stages = Stages(root, limit=None)
    a, b = merged(stages, 3 * U, "v1"), merged(stages, 2 * U, "v2")
    age(a, 3)
    native = fake_file(root / "native" / "engine_native-a.so", U, 9)

    code, out = cli("cache", "--cache-dir", str(root))
    assert code == 0 and out["cache_dir"] == str(root)
    assert out["limit"] == DEFAULT_CACHE_LIMIT_BYTES and out["limit_from"] == "default"
    listed = {e["path"]: e for e in out["entries"]}
    assert listed[f"artifacts/{a.name}"]["bytes"] == 3 * U
    assert listed[f"artifacts/{a.name}"]["stage"] == "merged"
    assert 3 * DAY - 60 < listed[f"artifacts/{a.name}"]["age_s"] < 3 * DAY + 60
    assert listed["native/engine_native-a.so"]["kind"] == "native"
    assert out["bytes"] == sum(e["bytes"] for e in out["entries"]) and out["frees"] == out["bytes"]

    monkeypatch.setenv("QGPU_CACHE_DIR", str(root))  # the default cache dir
    monkeypatch.setenv("QGPU_CACHE_LIMIT", "none")
    code, out = cli("cache")
    assert code == 0 and out["limit"] is None and out["limit_from"] == "QGPU_CACHE_LIMIT"

    size = f"{(index_bytes(root) + 2 * U + U // 2) / 2**20:.1f}M"  # 6 U of entries
    code, out = cli("cache", "prune", "--max-size", size, "--dry-run")
    assert code == 0 and out["dry_run"] and out["limit_from"] == "--max-size"
    assert [e["path"] for e in out["removed"]] == ["native/engine_native-a.so",
                                                   f"artifacts/{a.name}"]
    assert out["freed"] == 4 * U and native.is_file() and a.is_dir()

    code, out = cli("cache", "prune", "--max-size", size)
    assert code == 0 and not out["dry_run"] and not out["over_limit"]
    assert not native.exists() and not a.exists() and b.is_dir()
    assert out["freed"] == 4 * U and out["frees"] <= parse_size(size)

    assert main(["cache", "prune", "--older-than", "0", "--cache-dir", str(root)]) == 0
    text = capsys.readouterr().out
    assert "removed artifact" in text and b.name in text and "freed 128 MiB (1 entry)" in text
    assert not b.exists()

    assert main(["cache", "--cache-dir", str(root)]) == 0
    text = capsys.readouterr().out
    assert "index" in text and "no limit (QGPU_CACHE_LIMIT)" in text


@pytest.mark.parametrize("argv,needle", [
    (["cache", "prune", "--max-size", "20X"], "--max-size: '20X' is not a size"),
    (["cache", "prune", "--max-size=-5G"], "--max-size: '-5G' is not a size"),
    (["cache", "prune", "--older-than", "soon"], "argument --older-than: expected a number"),
    (["cache", "prune", "--older-than", "-1"], "at least 0"),
    (["cache", "--all"], "belong to 'cache prune'"),
    (["cache", "prune", "--all", "--older-than", "3"], "takes no --max-size or --older-than"),
    (["cache", "tidy"], "invalid choice: 'tidy'"),
])
def test_cache_command_usage_errors(argv: list[str], needle: str, tmp_path: Path) -> None:
    code, out = cli(*argv, "--cache-dir", str(tmp_path))
    assert code == 2 and out["error"]["kind"] == "usage", out
    assert needle in out["error"]["message"]


def test_cache_command_bad_env_and_cache_dir(tmp_path: Path, capsys,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QGPU_CACHE_LIMIT", "20 gigs")
    assert main(["cache", "prune", "--cache-dir", str(tmp_path)]) == 2
    assert "error (usage): $QGPU_CACHE_LIMIT: '20 gigs' is not a size" in capsys.readouterr().err
    a_file = tmp_path / "f"
    a_file.write_text("x")
    code, out = cli("cache", "--cache-dir", str(a_file))
    assert code == 2 and "is not a directory" in out["error"]["message"]
