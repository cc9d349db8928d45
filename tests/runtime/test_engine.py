"""The sparse engine is the model: on the session's tiny GPU build (conftest.py) its generated
tokens and every bank's recurrent state after every token equal the stock path's on the same
checkpoint, in float32 and bfloat16, over launches that exercise every part of the machine; it
computes from the checkpoint's tensors only, and a changed weight changes what it does."""

import ast
import hashlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from qgpu import protocol as T
from qgpu.circuits.gpu.compiled import gpu_schedule
from qgpu.compiler.schedule import LayerShape
from qgpu.driver import compile_file, compile_source, place_arguments
from qgpu.errors import LaunchError
from qgpu.runtime import (
    Divergence,
    GpuModel,
    ModelRun,
    engine_native,
    run_batch,
    run_checked,
    run_launch,
)
from qgpu.runtime import engine as engine_module
from qgpu.runtime.engine import NativeStep
from qgpu.suite import runner
from qgpu.suite.runner import by_name

USER_KERNELS = Path(__file__).parent.parent / "user_kernels"

SUITE_LAUNCHES = (  # short prompts: the stock path's batch is padded to the longest
    "atomic_inc_dec",  # two thread blocks; four lanes' atomics on one word, in lane order
    "shfl_broadcast",  # warp shuffles across four warps
    "shfl_width2",
    "reverse_dyn",  # dynamic shared memory and a barrier across warps
    "index_2d",  # a 2 x 2 grid of 3 x 2 blocks
    "factorial",  # a loop
    "fill",
    "relu",
    "sign",
    "vec_abs",  # three thread blocks of 10 threads
)
SPILL = """
extern "C" __global__ void spill16(const int *x, int *y) {
    int t = threadIdx.x;
""" + "".join(f"    int v{i} = x[{i}] + t;\n" for i in range(16)) + """
    y[t] = """ + " + ".join(f"v{i} * v{15 - i}" for i in range(8)) + """;
}
"""
"""16 values live at once: more than the machine's 15 registers, so some live in local memory."""
TOKEN_LIMIT = {"float32": 60, "bfloat16": 24}
"""Generated tokens compared per launch (the stock path costs ~1 s a step here; a launch
that runs longer stops at the limit on both paths, with the same error). 60 covers the fault
(49 tokens) and copy's whole launch (57)."""


def suite_launch(name: str) -> T.Launch:
    return runner.suite_launch(by_name(name))[2]


def user_launch(file: str, name: str, block: int, args: list) -> T.Launch:
    kernel = compile_file(USER_KERNELS / file).kernel(name)
    place = place_arguments(kernel.ptx.params, args)
    return T.Launch.checked(kernel.program, (1, 1), (block, 1), place, 0)


def launches() -> list[list[T.Launch]]:
    """Two batches: the short prompts with a fault and a runaway launch; the register spill
    (its 27 ROM blocks make a 643-token prompt) with copy (316), whose 57 tokens end it."""
    rng = np.random.default_rng(0)
    fault = user_launch("oob_read.cu", "shift_left", 8,  # reads past its array: a fault
                        [[int(v) for v in rng.integers(-9, 9, 8)], {"zeros": 8}, 8])
    runaway = user_launch("spin_wait.cu", "spin", 4, [[0], {"zeros": 4}])  # never ends
    spill = compile_source(SPILL).kernel("spill16")
    assert spill.program.local_words > 0
    place = place_arguments(spill.ptx.params, [list(range(1, 17)), {"zeros": 4}])
    spilled = T.Launch.checked(spill.program, (1, 1), (4, 1), place, 0)
    return [[suite_launch(n) for n in SUITE_LAUNCHES] + [fault, runaway],
            [spilled, suite_launch("copy")]]


def trace(gm: GpuModel, batch: list[T.Launch], limit: int) -> tuple[list, list]:
    """Every launch's outcome, and per launch and generated token: the token and a digest of
    every bank's recurrent state once the model has read it back (values; -0 counts as 0)."""
    steps: list[list[tuple[str, str]]] = [[] for _ in batch]

    def record(b: int, i: int, token: str, session) -> None:
        digest = hashlib.sha256()
        for bank, (layer, head) in sorted(gm.banks.items()):
            state = (session.head(layer, head, b).float() + 0.0).cpu().numpy()
            digest.update(bank.encode() + state.tobytes())
        steps[b].append((token, digest.hexdigest()))

    outcomes = [(type(o).__name__, o.generated if isinstance(o, ModelRun) else o.message,
                 o.memory if isinstance(o, ModelRun) else None)
                for o in run_batch(gm, batch, token_limit=limit, on_token=record)]
    return outcomes, steps


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_engine_is_the_stock_model_token_by_token(build_dir, dtype: str) -> None:
    """Ten suite launches (several thread blocks, a 2-D grid, atomics on one word, shuffles, a
    barrier, loops), a fault and a runaway launch side by side in one batch, and a launch whose
    registers spill to local memory, on each path."""
    gm = GpuModel.load(build_dir, dtype=dtype)
    assert gm.sparse.native is not None, gm.sparse.native_off  # CI has a C compiler
    limit = TOKEN_LIMIT[dtype]
    for batch in launches():
        stock = trace(gm.with_engine("stock"), batch, limit)
        for step in ("native", "pytorch"):
            sparse = trace(replace(gm, native=step == "native"), batch, limit)
            for b in range(len(batch)):
                assert sparse[0][b] == stock[0][b], f"{step} step, launch {b}: outcome"
                for i, (s, t) in enumerate(zip(sparse[1][b], stock[1][b], strict=True)):
                    assert s == t, f"{step} step, launch {b}, generated token {i}: {s[0]} vs {t[0]}"
        # every launch ran to its end, its fault or the limit
        assert all(kind == "ModelRun" or "fault" in what or "did not end within" in what
                   for kind, what, _ in sparse[0]), sparse[0]
        if len(batch) > 2:
            assert "did not end within" in sparse[0][-1][1]
            assert ("fault" in sparse[0][-2][1]) == (limit >= 49), sparse[0][-2]
        else:  # the spill's local-memory frames came in the part compared; copy ended
            assert any("mem:l" in tok for tok, _ in sparse[1][0]), sparse[1][0]
            assert (sparse[0][1][0] == "ModelRun") == (limit >= 57), sparse[0][1]


@pytest.mark.parametrize("native", [True, False], ids=["native", "pytorch"])
def test_a_changed_weight_changes_the_engine(gpu, native: bool) -> None:
    """The engine reads the checkpoint's weights: take away the down projection of the rule
    group that writes ``cur.m`` (the last EXEC's lanes) in the engine's own tensors (which the
    native step re-encodes when it is bound), and ``--check`` stops at that group's layer,
    naming the feature."""
    engine, gm = gpu.sparse, replace(gpu, native=native)
    sched = gpu_schedule(LayerShape.from_config(gpu.config))
    layer, _ = sched.neurons["cur.m"]
    down = engine.layers[layer].down.matrix  # CSR
    crow, values = down.crow_indices(), down.values()
    rows = [v for d in sched.dims["cur.m"] for v in range(int(crow[d]), int(crow[d + 1]))]
    kept, bound = values[rows].clone(), engine.native
    try:
        values[rows] = 0
        engine.native = NativeStep(bound.lib, engine)
        with pytest.raises(Divergence) as err:
            run_launch(gm, suite_launch("copy"), check_layers=True)
    finally:
        values[rows] = kept
        engine.native = bound
    assert f"circuit layer {layer} left the reference semantics: cur.m[" in err.value.message
    assert run_launch(gm, suite_launch("copy")).generated[-1] == T.name("end")


def test_a_launch_that_spills_is_exact_on_the_engine(gpu) -> None:
    """The register spill's whole launch, checked token by token and word by word."""
    launch = launches()[1][0]
    run = run_checked(gpu, launch)
    assert run.exact, run.divergence
    assert any("mem:l" in tok for tok in run.generated)


def test_the_engine_keeps_only_what_is_nonzero(gpu) -> None:
    """Every bank's head is kept, most heads are not; the engine holds a small fraction of
    the circuit layers' dense size."""
    engine = gpu.sparse
    kept = {(i, h) for i, layer in enumerate(engine.layers) for h in layer.heads}
    assert set(gpu.banks.values()) <= kept
    heads = gpu.config["linear_num_value_heads"] * gpu.circuit_layers
    assert len(kept) < heads / 3
    assert engine.resident_bytes() < 200e6


def qgpu_imports(module) -> set[str]:
    """The qgpu modules a module's source imports from."""
    tree = ast.parse(Path(module.__file__).read_text())
    return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
            and n.module and n.module.startswith("qgpu")}


def test_the_engine_computes_from_the_checkpoint_only() -> None:
    """No evaluator, interpreter or circuit graph at run time: the engine's modules import
    nothing of qgpu but the cache rule, the checkpoint's file list, the session interface and
    each other."""
    imported = qgpu_imports(engine_module)
    assert imported <= {"qgpu.cache", "qgpu.model.merge", "qgpu.runtime.session",
                        "qgpu.runtime.engine_native"}, imported
    imported = qgpu_imports(engine_native)
    assert imported <= {"qgpu.cache"}, imported


def test_a_failed_launch_says_why(gpu) -> None:
    """A fault and a runaway launch end with their LaunchError on the engine too, also where the
    token limit stops a launch inside a frame."""
    fault, runaway = launches()[0][-2:]
    with pytest.raises(LaunchError, match="fault"):
        run_launch(gpu, fault)
    with pytest.raises(LaunchError, match="did not end within 12 generated tokens"):
        run_launch(gpu, runaway, token_limit=12)
    spilled = launches()[1][0]  # a limit that cuts a frame: the error names the last block
    stream = run_launch(gpu, spilled).generated
    cut = next(i for i, t in enumerate(stream) if T.body(t).startswith("d1:")) + 1
    with pytest.raises(LaunchError, match=f"within {cut} generated tokens.*last block run: exec:"):
        run_launch(gpu, spilled, token_limit=cut)


def test_the_cache_keeps_one_sparse_form_per_checkpoint_on_disk(tmp_path) -> None:
    """Deriving a checkpoint's form first removes the forms of checkpoints that are gone, of
    the one it replaces, and of unknown origin; another live checkpoint's form stays."""
    import torch
    from safetensors.torch import save_file

    live, gone, rebuilt = tmp_path / "live", tmp_path / "gone", tmp_path / "rebuilt"
    live.mkdir()
    rebuilt.mkdir()
    forms = tmp_path / "engine"
    forms.mkdir()
    for name, source in (("a", live), ("b", gone), ("c", rebuilt), ("d", None)):
        meta = {} if source is None else {"checkpoint": str(source.resolve())}
        save_file({"x": torch.zeros(1)}, str(forms / f"{name}.safetensors"), metadata=meta)
    (forms / "e.safetensors").write_bytes(b"not a safetensors file")
    engine_module._prune(forms, rebuilt)
    assert sorted(p.name for p in forms.iterdir()) == ["a.safetensors"]
