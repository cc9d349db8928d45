"""Which model the app serves and what its header says; the Space's GPU decorator; app.py's
options."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from qgpu.app import host as H
from qgpu.app import space

ROOT = Path(__file__).resolve().parents[2]


def test_default_base_is_the_2b_when_built_or_reachable_else_tiny(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert H.resolve_base(None, None, reachable=lambda: False) == ("tiny", "float32")
    assert H.resolve_base(None, None, reachable=lambda: True) == (H.DEFAULT_HUB_BASE,
                                                                   "bfloat16")
    built = H.default_build_dir(H.DEFAULT_HUB_BASE, "bfloat16") / "merged"
    built.mkdir(parents=True)
    (built / "qgpu_circuit.json").write_text("{}")
    assert H.resolve_base(None, None, reachable=lambda: False)[0] == H.DEFAULT_HUB_BASE
    assert H.resolve_base("tiny", "bfloat16", reachable=lambda: True) == ("tiny", "bfloat16")
    assert H.default_build_dir("Qwen/Qwen3.5-2B", "bfloat16") == \
        Path("build/app/Qwen--Qwen3.5-2B-bfloat16")


def test_the_hub_is_not_asked_when_offline(monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert H.hub_reachable() is False


def test_header_says_what_is_loaded(host) -> None:
    info = host.info()
    assert (info["base"], info["tiny"], info["circuit_layers"], info["dtype"], info["engine"],
            info["decode_step"], info["device"]) == ("tiny", True, 43, "float32", "sparse",
                                                     "native", "cpu")
    assert info["hidden"] == info["base_hidden"] + info["k"] and info["k_used"] <= info["k"]
    header = host.header_markdown()
    for text in ("43 circuit layers", f"K = {info['k']}", "float32", "sparse engine", "cpu"):
        assert text in header
    assert "random" in host.banner_markdown() and "--base Qwen/Qwen3.5-2B" in \
        host.banner_markdown()


def test_spaces_gpu_wraps_only_where_spaces_is_importable(monkeypatch) -> None:
    def fn(x):
        return x + 1

    monkeypatch.setitem(sys.modules, "spaces", None)  # not importable
    assert space.on_gpu(60)(fn) is fn
    calls = []
    fake = types.SimpleNamespace(GPU=lambda duration: lambda f: calls.append(duration) or f)
    monkeypatch.setitem(sys.modules, "spaces", fake)
    assert space.on_gpu(60)(fn) is fn and calls == [60]
    monkeypatch.setenv("SPACE_ID", "someone/qgpu")
    assert space.on_space()


def test_app_py_options(monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    for var in ("QGPU_BASE", "QGPU_MODEL", "GRADIO_SERVER_PORT"):
        monkeypatch.delenv(var, raising=False)
    import app

    ns = app.parse(["--base", "tiny", "--dtype", "float32", "--device", "cpu", "--host",
                    "0.0.0.0", "--port", "7999"])
    assert (ns.base, ns.model, ns.dtype, ns.device, ns.host, ns.port) == \
        ("tiny", None, "float32", "cpu", "0.0.0.0", 7999)
    assert app.parse([]).port == 7860
    with pytest.raises(SystemExit):
        app.parse(["--base", "tiny", "--model", "build/x"])
