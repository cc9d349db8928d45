"""The cached build pipeline: CLI end to end, cache hits, rebuilds, local and Hub bases, locking."""

import contextlib
import io
import json
import os
import shutil
import threading
import time
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from qgpu.cli import main
from qgpu.errors import UsageError
from qgpu.model import build as build_module
from qgpu.model.build import CIRCUITS, Stages, build
from qgpu.model.merge import METADATA_FILE
from qgpu.model.tinybase import VOCAB_SIZE

FAKE_COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def cold(tmp_path_factory: pytest.TempPathFactory, cache: Path) -> dict:
    """One cold `python -m qgpu build --base tiny --circuit null` through the CLI."""
    out = tmp_path_factory.mktemp("out")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("QGPU_CACHE_DIR", str(cache))
        result = run_cli(["build", "--base", "tiny", "--circuit", "null", "--out", str(out)])
    return {"out": out, "result": result}


def run_cli(argv: list[str]) -> dict:
    """Run the CLI with --json and parse its one JSON object."""
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main([*argv, "--json"])
    out = json.loads(stdout.getvalue())
    out["exit"] = code
    return out


@pytest.mark.slow
def test_cli_builds_tiny_base_and_merged_model(cold: dict, cache: Path) -> None:
    out, result = cold["out"], cold["result"]
    assert result["exit"] == 0
    assert result["base"] == str(out / "base") and result["merged"] == str(out / "merged")
    assert {s: v["cached"] for s, v in result["stages"].items()} == {"base": False, "merged": False}
    base_config = json.loads((out / "base" / "config.json").read_text())
    assert base_config["architectures"] == ["Qwen3_5ForConditionalGeneration"]
    config = json.loads((out / "merged" / "config.json").read_text())
    assert config["hidden_size"] == 81 and config["dtype"] == "bfloat16"
    assert json.loads((out / "merged" / METADATA_FILE).read_text())["circuit"] == {
        "circuit": "null"
    }
    for stage in result["stages"].values():  # artifacts live in the cache, published by links
        assert Path(stage["artifact"]).is_relative_to(cache)
    model = AutoModelForCausalLM.from_pretrained(out / "merged")
    with torch.no_grad():
        logits = model(torch.tensor([[VOCAB_SIZE, 9707, VOCAB_SIZE + 1]])).logits
    assert logits.shape == (1, 3, VOCAB_SIZE + 4)


@pytest.mark.slow
def test_second_run_is_a_cache_hit(cold: dict, cache: Path, tmp_path: Path) -> None:
    merged = Path(cold["result"]["stages"]["merged"]["artifact"]) / "model.safetensors"
    mtime = merged.stat().st_mtime_ns
    start = time.monotonic()
    result = build("tiny", tmp_path / "again", circuit="null", cache_dir=cache)
    assert time.monotonic() - start < 5
    assert all(stage["cached"] for stage in result.stages.values())
    assert merged.stat().st_mtime_ns == mtime
    assert (result.merged / "model.safetensors").read_bytes() == merged.read_bytes()


@pytest.mark.slow
def test_corrupted_artifact_is_rebuilt(cold: dict, cache: Path, tmp_path: Path) -> None:
    first = build("tiny", tmp_path / "a", circuit="null", cache_dir=cache)
    artifact = Path(first.stages["merged"]["artifact"])
    (artifact / "model.safetensors").write_bytes(b"not a safetensors file")
    result = build("tiny", tmp_path / "b", circuit="null", cache_dir=cache)
    assert result.stages["base"]["cached"] is True
    assert result.stages["merged"]["cached"] is False
    AutoModelForCausalLM.from_pretrained(result.merged)  # loads again


@pytest.mark.slow
def test_missing_artifact_is_rebuilt(cold: dict, cache: Path, tmp_path: Path) -> None:
    first = build("tiny", tmp_path / "a", circuit="null", cache_dir=cache)
    artifact = Path(first.stages["base"]["artifact"])
    (artifact / "tokenizer.json").unlink()
    result = build("tiny", tmp_path / "b", circuit="null", cache_dir=cache)
    assert result.stages["base"]["cached"] is False
    assert (result.base / "tokenizer.json").is_file()


@pytest.mark.slow
def test_local_directory_base_is_keyed_by_file_hashes(
    cold: dict, cache: Path, tmp_path: Path
) -> None:
    source = tmp_path / "my-base"
    shutil.copytree(cold["out"] / "base", source)
    first = build(str(source), tmp_path / "out", circuit="null", dtype="float32", cache_dir=cache)
    assert first.stages["base"]["cached"] is False and first.stages["merged"]["cached"] is False
    assert sorted(p.name for p in first.base.iterdir()) == sorted(p.name for p in source.iterdir())
    assert json.loads((first.merged / "config.json").read_text())["dtype"] == "float32"
    again = build(str(source), tmp_path / "out", circuit="null", dtype="float32", cache_dir=cache)
    assert all(stage["cached"] for stage in again.stages.values())

    stages = Stages(cache)
    before = stages.file_hashes(source)
    config = source / "generation_config.json"
    config.write_text(config.read_text().replace("0.95", "0.9"))
    after = stages.file_hashes(source)
    assert before.keys() == after.keys()
    assert [n for n in before if before[n] != after[n]] == ["generation_config.json"]


@pytest.mark.slow
def test_hub_base_is_downloaded_with_snapshot_download(
    cold: dict, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    hub = tmp_path / "hf" / "models--Qwen--Qwen3.5-2B"

    def fake_snapshot_download(repo_id: str, **kwargs) -> str:
        calls.append((repo_id, kwargs))
        snapshot = hub / "snapshots" / FAKE_COMMIT
        if not snapshot.exists():  # the HF layout: snapshot files link to blobs
            (hub / "blobs").mkdir(parents=True)
            snapshot.mkdir(parents=True)
            for path in (cold["out"] / "base").iterdir():
                blob = hub / "blobs" / path.name
                shutil.copyfile(path, blob)
                os.symlink(blob, snapshot / path.name)
        return str(snapshot)

    monkeypatch.setattr(build_module, "snapshot_download", fake_snapshot_download)
    result = build("Qwen/Qwen3.5-2B", tmp_path / "out", circuit="null", revision="main",
                   cache_dir=cache)
    assert calls == [
        ("Qwen/Qwen3.5-2B", {"revision": "main", "allow_patterns": build_module.HUB_PATTERNS})
    ]
    assert result.stages["base"]["cached"] is False
    assert all(not p.is_symlink() for p in result.base.iterdir())
    base_files = sorted(p.name for p in (cold["out"] / "base").iterdir())
    assert sorted(p.name for p in result.base.iterdir()) == base_files
    again = build("Qwen/Qwen3.5-2B", tmp_path / "out", circuit="null", revision="main",
                   cache_dir=cache)
    assert len(calls) == 2  # the revision is resolved each time; the stages are not redone
    assert all(stage["cached"] for stage in again.stages.values())

    def offline(repo_id: str, **kwargs) -> str:
        raise OSError("no network")

    monkeypatch.setattr(build_module, "snapshot_download", offline)
    with pytest.raises(UsageError, match="could not download Qwen/Qwen3.5-9B"):
        build("Qwen/Qwen3.5-9B", tmp_path / "x", circuit="null", cache_dir=cache)


def test_concurrent_cold_builds_build_once(tmp_path: Path) -> None:
    produced = []

    def produce(target: Path) -> None:
        produced.append(threading.get_ident())
        time.sleep(0.3)
        (target / "out.txt").write_text("done")

    paths: list[Path] = []

    def worker() -> None:
        paths.append(Stages(tmp_path).run("demo", {"x": 1}, produce))

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(produced) == 1
    assert len(set(paths)) == 1 and (paths[0] / "out.txt").read_text() == "done"
    assert not [p for p in (tmp_path / "artifacts").iterdir() if p.name.startswith(".")]


def test_failed_stage_leaves_nothing_behind(tmp_path: Path) -> None:
    def produce(target: Path) -> None:
        (target / "half.txt").write_text("...")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        Stages(tmp_path).run("demo", {}, produce)
    assert list((tmp_path / "artifacts").iterdir()) == []


def test_usage_errors_in_json(tmp_path: Path) -> None:
    out = run_cli(["build", "--base", "tiny", "--circuit", "nope", "--out", str(tmp_path)])
    assert out["exit"] == 2 and out["error"]["kind"] == "usage"
    assert "unknown circuit 'nope'" in out["error"]["message"] and "null" in out["error"]["message"]
    out = run_cli(["build", "--base", "./no/such/dir", "--out", str(tmp_path)])
    assert (
        out["exit"] == 2 and "not 'tiny', a directory, or a Hub model id" in out["error"]["message"]
    )
    out = run_cli(["build", "--out", str(tmp_path)])
    assert out["exit"] == 2 and "--base" in out["error"]["message"]
    assert "null" in CIRCUITS


def test_a_rebuild_removes_what_it_supersedes_once_unused(tmp_path: Path) -> None:
    """Artifacts of the same stage and inputs built by other code go once unused for an hour;
    other inputs' artifacts, and superseded ones still in use, stay."""
    stages = Stages(tmp_path)

    def produce(target: Path) -> None:
        (target / "out.txt").write_text("x")

    def run(x: int, sources: str) -> Path:
        return stages.run("demo", {"x": x, "sources": sources}, produce)

    def age(path: Path) -> None:
        old = time.time() - build_module.PRUNE_AFTER_S - 1
        os.utime(path, (old, old))

    v1, other = run(1, "v1"), run(2, "v1")
    v2 = run(1, "v2")
    assert v1.is_dir() and v2.is_dir()  # v1 was used a moment ago: kept
    age(v1)
    age(other)
    v3 = run(1, "v3")
    assert not v1.exists() and v2.is_dir() and v3.is_dir() and other.is_dir()
    age(v2)
    assert run(1, "v2") == v2  # a cache hit marks it used
    run(1, "v4")
    assert v2.is_dir()
    age(v2)
    age(v3)
    v5 = run(1, "v5")
    assert not v2.exists() and not v3.exists()
    assert sorted(p.name for p in (tmp_path / "artifacts").iterdir()) == sorted(
        [other.name, v5.name, run(1, "v4").name])
    report: dict[str, dict] = {}
    stages.run("demo", {"x": 1, "sources": "v1"}, produce, report)
    assert report["demo"]["cached"] is False and (v1 / "out.txt").read_text() == "x"  # rebuilt
