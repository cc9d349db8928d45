"""Launches on a merged model (the session's tiny GPU build, conftest.py), on the sparse engine
unless a test names the stock path. The model writes the whole launch itself, token for token
what the reference machine says, and the results read from its state equal the kernel's intent
— with the interpreter unavailable, so the host computes nothing."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer

from qgpu import cli
from qgpu import protocol as T
from qgpu.circuits.gpu.compiled import gpu_schedule
from qgpu.compiler.schedule import LayerShape
from qgpu.driver import SUITE_DIR, compile_file, compile_source, place_arguments
from qgpu.errors import LaunchError
from qgpu.machine import interp
from qgpu.model.merge import read_text_config
from qgpu.runtime import Divergence, GpuModel, run_launch
from qgpu.suite.runner import by_name, make_args, print_model_report, suite_module
from qgpu.toolchain.cuda import available_compilers

KERNEL = "copy"  # three thread blocks, divergence at the bounds check, indexed loads and stores


def launch_of(name: str, seed: int = 0):
    k = by_name(name)
    kernel = suite_module(k).kernel(name)
    args = make_args(k, seed)
    place = place_arguments(kernel.ptx.params, args)
    return k, kernel, args, T.Launch.checked(kernel.program, k.grid, k.block, place,
                                                k.dynamic_shared)


def test_the_model_runs_a_launch_with_no_interpreter(gpu, monkeypatch) -> None:
    k, kernel, args, _ = launch_of(KERNEL)
    want = [list(map(int, a)) if isinstance(a, list) else a for a in k.intent(args)]

    def unavailable(*_a, **_k):
        raise AssertionError("the interpreter ran during a model launch")

    monkeypatch.setattr(interp, "run_program", unavailable)
    monkeypatch.setattr(interp._Launch, "run", unavailable)
    result = kernel.launch(grid=k.grid, block=k.block, args=args, backend="model", model=gpu)
    assert result.args == want
    assert {k: result.model[k] for k in ("prompt_tokens", "generated_tokens", "engine",
                                         "decode_step")} == \
        {"prompt_tokens": 316, "generated_tokens": 57, "engine": "sparse", "decode_step": "native"}
    assert set(result.model["seconds"]) == {"load", "prefill", "decode"}


def test_cli_runs_the_dot_product_on_the_model_checked(gpu, build_dir, monkeypatch,
                                                       capsys) -> None:
    """The README's dot product through ``run --backend model --model BUILD --check --json``
    (the fixture's model stands in for the load, which the fixture did)."""
    monkeypatch.setattr(GpuModel, "load", lambda path, dtype=None, device="cpu", engine="sparse":
                        gpu if (Path(path), dtype, device, engine) == (build_dir, None, "cpu",
                                                                       "sparse")
                        else pytest.fail(path))
    status = cli.main(["run", str(SUITE_DIR / "dot.cu"), "--grid", "1", "--block", "4",
                       "--args", "[[1,2,3],[4,5,6],{\"zeros\":1},3]", "--backend", "model",
                       "--model", str(build_dir), "--check", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert status == 0, out
    assert out["args"][2] == [32] and out["exact"] is True
    assert (out["prompt_tokens"], out["generated_tokens"]) == (132, 30)


def test_both_high_multiplies_on_the_model_checked(gpu) -> None:
    """MULHI and MULHIU on full-range words (signs, the extremes), checked token by token."""
    kernel = compile_file(SUITE_DIR / "mulhi.cu").kernel("mulhi")
    x, y = [-7, 123456789, -2**31, 2**31 - 1], [3, -987654321, -2**31, 2**31 - 1]
    result = kernel.launch(grid=(1, 1), block=(4, 1), args=[x, y, {"zeros": 4}, {"zeros": 4}, 4],
                           backend="model", model=gpu, check=True)
    assert result.model["exact"] is True, result.model
    assert result.args[2] == [a * b >> 32 for a, b in zip(x, y, strict=True)]
    unsigned = [(a % 2**32) * (b % 2**32) >> 32 for a, b in zip(x, y, strict=True)]
    assert result.args[3] == [u - 2**32 if u >= 2**31 else u for u in unsigned]


RACY = """extern "C" __global__ void racy(int *out) {
    __shared__ int s[8];
    int t = threadIdx.x;
    s[t] = t;
    if (t >= 4) out[t - 4] = s[t - 4];  /* warp 1 reads warp 0's words: no barrier */
}"""


@pytest.mark.skipif(not available_compilers(), reason="no CUDA compiler")
def test_a_checked_launch_reports_the_replays_races(gpu) -> None:
    """The model runs a racy kernel as the machine does; ``check``'s replay on the machine
    interpreter is what sees the races, and the result carries them (without a check, no
    interpreter runs and there are none to report)."""
    kernel = compile_source(RACY).kernel()
    shape = {"grid": (1,), "block": (8,), "args": [{"zeros": 4}]}
    checked = kernel.launch(**shape, backend="model", model=gpu, check=True)
    assert checked.model["exact"] is True and checked.args == [[0, 1, 2, 3]]
    reference = kernel.launch(**shape, backend="interp")
    assert [r.key() for r in checked.races] == [r.key() for r in reference.races]
    assert checked.warnings == reference.warnings and len(checked.warnings) == 4
    assert kernel.launch(**shape, backend="model", model=gpu).races == []


def test_bfloat16_runs_the_dot_product_exactly(build_dir) -> None:
    """The float32 build loaded in bfloat16 (``--dtype bfloat16``, its own process): every
    token and word exact."""
    proc = subprocess.run([sys.executable, "-m", "qgpu", "run", str(SUITE_DIR / "dot.cu"),
                           "--grid", "1", "--block", "4", "--args",
                           "[[1,2,3],[4,5,6],{\"zeros\":1},3]", "--backend", "model",
                           "--model", str(build_dir), "--dtype", "bfloat16", "--check", "--json"],
                          capture_output=True, text=True, check=False)
    out = json.loads(proc.stdout)
    assert proc.returncode == 0 and out["exact"] is True and out["args"][2] == [32], out


def test_isolation_holds_for_the_merged_gpu(gpu, build_dir) -> None:
    """The compiler issue's isolation proofs on this model: the circuit layers leave text
    tokens exactly as they were and the base layers add exactly zero to circuit tokens (a
    launch's prompt), circuit tokens get logit exactly 0 on text, and the text distribution is
    the base's (float32)."""
    from transformers import AutoModelForCausalLM

    from tests.model.helpers import SENTENCES, measure, text_batches, trace

    model, config = gpu.model, read_text_config(build_dir / "base")
    d_base, vocab = config["hidden_size"], config["vocab_size"]
    n_circuit = len(json.loads((build_dir / "merged" / "qgpu_circuit.json").read_text())
                    ["circuit"]["allocation"]["layers"])
    text = AutoTokenizer.from_pretrained(build_dir / "base")(SENTENCES[4], return_tensors="pt")
    records, logits = trace(model, text.input_ids)
    for i, (inp, out) in enumerate(records):
        assert not inp[..., d_base:].any() and not out[..., d_base:].any(), f"layer {i}"
        if i < n_circuit:
            assert torch.equal(out, inp), f"circuit layer {i} changed a text token"
    assert not logits[..., vocab:].any()
    _, _, _, launch = launch_of("dot")
    records, logits = trace(model, torch.tensor([[gpu.ids[t] for t in T.prompt_tokens(launch)]]))
    for i, (inp, out) in enumerate(records):
        assert not inp[..., :d_base].any() and not out[..., :d_base].any(), f"layer {i}"
        if i >= n_circuit:
            assert torch.equal(out, inp), f"base layer {i - n_circuit} changed a circuit token"
    assert not logits[..., :vocab].any()
    # The text distribution: the one residue is rms_norm_eps, which the widened norms apply as
    # if multiplied by D / d_base (qgpu/merge.py) — 47 here (hidden 64 + K), 2.5 for the real
    # 2B — so KL is ~1e-5 (measured 1.3e-5) where the null circuit's test (D / d_base = 1.3)
    # gets far below. (The random tiny base's near-ties can flip a greedy choice at that.)
    base = AutoModelForCausalLM.from_pretrained(build_dir / "base", dtype=torch.float32).eval()
    for batches in text_batches(build_dir / "base").values():
        assert measure(base, model, batches)["max"] <= 1e-4


def test_the_machine_state_is_decoded_from_the_model_after_every_token(gpu) -> None:
    """Registers, lane pcs and memory read from the model's own state after each token: at the
    end they are the machine's (the live-out registers as last written back, global memory),
    and a lane's pc moves as the stream says."""
    from tests.circuits.helpers import expected_registers

    k, _, _, launch = launch_of(KERNEL)
    ref = interp.run_program(launch.program, grid=k.grid, block=k.block, params=launch.params,
                             memory=launch.memory, allocations=launch.allocations)
    states = {}
    run_launch(gpu, launch, on_token=lambda i, tok, cache: states.update(
        {i: (tok, gpu.machine_state(cache))}))
    assert len(states) == 56  # every generated token but END, which is never read back
    last = states[55][1]
    for (lane, warp, r), v in expected_registers(launch, ref).items():
        assert last.registers[(warp, lane, r)] == v, (warp, lane, r)
    assert last.global_memory == [w & 0xFFFFFFFF for w in ref.memory]
    execs = [(i, T.body(tok)) for i, (tok, _) in states.items() if T.body(tok).startswith("exec")]
    i, body = execs[-1]  # exec:B:wW:mM — its lanes are at block B from then on
    _, block, warp, mask = body.split(":")
    for lane in range(4):
        if int(mask[1:]) >> lane & 1:
            assert states[i][1].lanes[(int(warp[1:]), lane)][0] == int(block), lane


def test_the_suite_report_checks_launches_side_by_side(gpu, capsys) -> None:
    """``python -m qgpu suite --model BUILD --batch 2 copy atomic_inc_dec``: two launches in one
    batch (prompts of 316 and 81 tokens), each exact token for token and layer by
    layer, results equal to the intent model."""
    assert print_model_report([KERNEL, "atomic_inc_dec"], "unused", gpu=gpu, batch=2) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {ln.split()[0]: ln.split() for ln in lines if ln.startswith((KERNEL, "atomic_inc"))}
    assert rows[KERNEL][1:3] == ["316", "57"] and rows[KERNEL][-1] == "exact"
    assert rows["atomic_inc_dec"][1:3] == ["81", "151"] and rows["atomic_inc_dec"][-1] == "exact"


def test_the_suite_report_runs_batches_in_worker_processes(build_dir: Path, capsys) -> None:
    """``--jobs 2``: each process loads the build; the rows of both batches, both exact."""
    names = [KERNEL, "atomic_inc_dec"]
    assert print_model_report(names, str(build_dir), layers=0, jobs=2) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {ln.split()[0]: ln.split() for ln in lines if ln.startswith((KERNEL, "atomic_inc"))}
    assert rows[KERNEL][1:4] == ["316", "57", "no"] and rows[KERNEL][-1] == "exact"
    assert rows["atomic_inc_dec"][2] == "151" and rows["atomic_inc_dec"][-1] == "exact"
    assert lines[-1].startswith("2/2 kernels exact on the model, 208 generated tokens")


def test_check_reports_the_first_diverging_token(gpu) -> None:
    k, _, _, launch = launch_of(KERNEL)
    ref = interp.run_program(launch.program, grid=k.grid, block=k.block, params=launch.params,
                             memory=launch.memory, allocations=launch.allocations)
    expected = T.expected_tokens(launch, ref.trace)
    wrong = list(expected)
    i = next(i for i, t in enumerate(wrong) if T.body(t).startswith("val"))
    wrong[i] = T.name("end")  # a reference that disagrees at token i: reported there
    with pytest.raises(Divergence) as err:
        run_launch(gpu, launch, expected=wrong)
    assert err.value.index == i and f"generated token {i} is" in err.value.message


def test_check_names_the_first_circuit_layer_that_goes_wrong(gpu) -> None:
    """A broken weight: the rule group writing ``cur.m`` (the last EXEC's lanes) loses its down
    projection. ``--check`` stops in the first pass that needs cur.m, at that group's layer,
    naming the feature — before any token goes wrong."""
    gpu = gpu.with_engine("stock")
    sched = gpu_schedule(LayerShape.from_config(gpu.config))
    layer, _ = sched.neurons["cur.m"]
    rows = [gpu.d_base + d for d in sched.dims["cur.m"]]
    down = gpu.model.model.layers[layer].mlp.down_proj.weight
    kept = down[rows].clone()
    _, _, _, launch = launch_of(KERNEL)
    try:
        with torch.no_grad():
            down[rows] = 0
        with pytest.raises(Divergence) as err:
            run_launch(gpu, launch, check_layers=True)
    finally:
        with torch.no_grad():
            down[rows] = kept
    assert f"circuit layer {layer} left the reference semantics: cur.m[" in err.value.message
    assert "in the pass that read generated token 0 (exec:" in err.value.message


def test_a_runaway_launch_stops_at_the_token_limit(gpu) -> None:
    """A kernel that never ends: the step limit (generated tokens) stops it with a clear error
    naming the last block the model ran."""
    kernel = compile_file(Path(__file__).parent.parent / "user_kernels" / "spin_wait.cu").kernel()
    with pytest.raises(LaunchError, match="did not end within 12 generated tokens"):
        kernel.launch(grid=(1, 1), block=(4, 1), args=[[0], {"zeros": 4}], backend="model",
                      model=gpu, step_limit=12)
