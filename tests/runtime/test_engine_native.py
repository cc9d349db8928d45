"""The engine's native decode step: where it cannot be built the engine says why and runs its
PyTorch step, with the same tokens; both forms of a matrix it binds give the same tokens.
(That the native step is the stock model token by token and state by state, and that a changed
weight changes it: tests/runtime/test_engine.py.)"""

from dataclasses import replace

from qgpu.runtime import ModelRun, engine_native, run_batch
from qgpu.runtime.engine import Engine, NativeStep
from qgpu.runtime.engine_native import library
from qgpu.suite import runner
from qgpu.suite.runner import by_name

NAMES = ("dot", "shfl_broadcast", "atomic_inc_dec", "index_2d")


def streams(gm) -> list[list[str]]:
    out = run_batch(gm, [runner.suite_launch(by_name(n))[2] for n in NAMES])
    assert all(isinstance(o, ModelRun) for o in out), out
    return [o.generated for o in out]


def test_no_compiler_no_native_step(monkeypatch, tmp_path) -> None:
    """QGPU_NATIVE=0, a compiler that is not there, and one that fails each say why."""
    monkeypatch.setenv("QGPU_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("QGPU_NATIVE", "0")
    assert library() == (None, "QGPU_NATIVE=0")
    monkeypatch.delenv("QGPU_NATIVE")
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    lib, why = library()
    assert lib is None and "no-such-cc failed" in why, why
    failing = tmp_path / "cc"
    failing.write_text("#!/bin/sh\necho 'cc: out of luck' >&2\nexit 1\n")
    failing.chmod(0o755)
    monkeypatch.setenv("CC", str(failing))
    lib, why = library()
    assert lib is None and "out of luck" in why, why
    assert not list(tmp_path.rglob("*.so"))


def test_the_library_is_compiled_once(monkeypatch, tmp_path) -> None:
    """Compiled into the cache dir on first use, reused after; a new one replaces the old."""
    monkeypatch.setenv("QGPU_CACHE_DIR", str(tmp_path))
    lib, why = library()
    assert lib is not None, why
    (built,) = (tmp_path / "native").glob("engine_native-*.so")
    stamp = built.stat().st_ino  # the same file (a rebuild renames a new one into place)
    stale = tmp_path / "native" / "engine_native-0.so"
    stale.write_bytes(b"")
    assert library()[0] is not None and built.stat().st_ino == stamp and stale.exists()
    monkeypatch.setattr(engine_native, "FLAGS", [*engine_native.FLAGS, "-DQGPU_REBUILT"])
    assert library()[0] is not None
    assert len(list((tmp_path / "native").glob("*.so"))) == 1 and not stale.exists()


def test_the_pytorch_step_where_there_is_no_native_one(gpu, monkeypatch) -> None:
    """An engine loaded with QGPU_NATIVE=0 says so and gives the native step's tokens."""
    monkeypatch.setenv("QGPU_NATIVE", "0")
    engine = Engine.load(gpu.path, gpu._loaded["meta"], gpu.sparse.dtype, gpu.device)
    assert engine.native is None and engine.native_off == "QGPU_NATIVE=0"
    plain = replace(gpu, _loaded={**gpu._loaded, "sparse": engine})
    assert plain.decode_step == "pytorch (QGPU_NATIVE=0)" and gpu.decode_step == "native"
    assert streams(plain) == streams(gpu)


def test_unpacked_matrices_give_the_same_tokens(gpu) -> None:
    """A matrix is packed (row and bfloat16 value in 4 bytes) where it can be; the other form,
    rows and float32 values apart, gives the same tokens."""
    engine = gpu.sparse
    packed = engine.native
    assert packed.model.layer[0].gate_up.packed and not packed.model.select.packed
    try:
        engine.native = NativeStep(packed.lib, engine, pack=False)
        assert not engine.native.model.layer[0].gate_up.packed
        unpacked = streams(gpu)
    finally:
        engine.native = packed
    assert unpacked == streams(gpu)
