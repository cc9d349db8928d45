"""No input ends in a traceback: the bad-input corpus (tests/bad_inputs/cases.py) through
``qgpu.cli.main`` in process and through the Python API, each case one error of its kind with a
message that names the cause, within a time limit; and a few real processes for what only a
process shows (exit status, a closed pipe, bytes on the command line, the compile time limit).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import qgpu.cli
from qgpu.cli import main
from qgpu.driver import compile_file, compile_source, load_ptx
from qgpu.errors import QgpuError, ResourceError
from qgpu.toolchain.cuda import available_compilers, compile_cuda
from tests.bad_inputs.cases import API, CLI, DOT_ARGS, Api

ROOT = Path(__file__).resolve().parent.parent
FILES = Path(__file__).resolve().parent / "bad_inputs" / "files"
DOT = ROOT / "kernels" / "dot.cu"
JSON_COMMANDS = {"run", "ptx", "asm", "map", "build", "calc"}
CASE_SECONDS = 30  # a case is a few ms to a second; more is a hang (first torch import ~5 s)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Inputs too big to commit or that git cannot hold: sources over 256 KiB, a kernel that
    needs 184 ROM blocks, a directory and a FIFO named like sources, fake model builds."""
    w = tmp_path_factory.mktemp("bad_inputs")
    kernel = (FILES / "ok.cu").read_text()
    (w / "big.cu").write_text("//" + "x" * 300_000 + "\n" + kernel)
    dot_ptx = (ROOT / "kernels" / "ptx" / "dot.ptx").read_text()
    (w / "big.ptx").write_text(dot_ptx + "//" + "x" * 300_000 + "\n")
    (w / "bigint.ptx").write_text(dot_ptx.replace("ret;", "mov.u32 %r1, " + "9" * 5000 + ";\n"
                                                  "\tret;", 1))
    (w / "regs.ptx").write_text(re.sub(r"\.reg \.b32\s+%r<\d+>", ".reg .b32 %r<1000000000>",
                                       dot_ptx))
    (w / "global4g.ptx").write_text(  # 4 GB declared (never allocated), then read
        dot_ptx.replace(".visible .entry", ".global .align 4 .b8 g[4000000000];\n.visible .entry")
        .replace("ret;", "ld.global.u32 %r1, [g];\n\tret;", 1))
    body = "\n".join(f"    a[threadIdx.x + {i % 5}] ^= a[threadIdx.x + {i * 3 % 7}] * {i + 3} + "
                     f"(a[{i % 4}] >> {i % 13});" for i in range(90))
    (w / "rom.cu").write_text('extern "C" __global__ void big(int* a) {\n' + body + "\n}\n")
    (w / "dir.cu").mkdir()
    if hasattr(os, "mkfifo"):
        os.mkfifo(w / "fifo.cu")
    for name, meta in (("badmeta", b"[]"), ("binmeta", b"\xff\xfe"),
                       ("noweights", json.dumps({
                           "circuit": {"circuit": "gpu", "banks": {}}, "dtype": "float32",
                           "token_ids": {}, "circuit_dims": [8],
                           "circuit_layers": [0, 1]}).encode())):
        (w / name).mkdir()
        (w / name / "qgpu_circuit.json").write_bytes(meta)
        (w / name / "config.json").write_text("{}")
    return w


def expand(argv: list[str], work: Path) -> list[str]:
    """The case's argv with its placeholders filled in (tests/bad_inputs/cases.py)."""
    out = []
    for arg in argv:
        arg = arg.replace("{f}", str(FILES)).replace("{w}", str(work)).replace("{dot}", str(DOT))
        arg = re.sub(r"\{deep:(\d+)\}", lambda m: "[" * int(m[1]) + "]" * int(m[1]), arg)
        arg = re.sub(r"\{digits:(\d+)\}", lambda m: "9" * int(m[1]), arg)
        out.append(arg)
    return out


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """Fail a case that runs longer than ``seconds`` instead of hanging the suite (POSIX)."""
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise TimeoutError(f"the case ran over {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def skip_without_compiler(message: str) -> None:
    if "no CUDA compiler found" in message and not available_compilers():
        pytest.skip("needs a CUDA compiler")


def test_the_corpus_has_150_cases_with_unique_ids() -> None:
    ids = [c[0] for c in CLI] + [f"api-{c[0]}" for c in API]
    assert len(ids) >= 150 and len(set(ids)) == len(ids)


@pytest.mark.parametrize("case", CLI, ids=[c[0] for c in CLI])
def test_cli_bad_input(capsys: pytest.CaptureFixture[str], work: Path,
                       case: tuple[str, list[str], str, str]) -> None:
    """Exit status 2, one error of the case's kind naming the cause (the JSON object on stdout
    with --json, else ``error (kind): message`` on stderr), no traceback, in time."""
    name, argv, kind, needle = case
    if "{w}/fifo.cu" in argv and not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    argv = expand(argv, work)
    if argv and argv[0] in JSON_COMMANDS:
        argv.append("--json")
    t0 = time.perf_counter()
    with time_limit(2 * CASE_SECONDS):
        code = main(argv)
    seconds = time.perf_counter() - t0
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    if "--json" in argv:
        lines = out.splitlines()
        assert len(lines) == 1, out  # exactly one JSON object
        error = json.loads(lines[0])["error"]
        found_kind, message = error["kind"], error["message"]
    else:
        assert out == ""
        match = re.fullmatch(r"error \((\w+)\): (.*)", err.strip(), re.DOTALL)
        assert match, err
        found_kind, message = match[1], match[2]
    skip_without_compiler(message)
    assert code == 2
    assert (found_kind, needle in message) == (kind, True), message
    assert seconds < CASE_SECONDS


@pytest.fixture(scope="module")
def api(work: Path) -> Api:
    import qgpu.driver

    mod = compile_file(DOT)
    ok = compile_source((FILES / "ok.cu").read_text()).kernel() if available_compilers() \
        else None
    return Api(qgpu.driver, mod.kernel("dot"), ok, mod, str(work), str(FILES))


@pytest.mark.parametrize("case", API, ids=[c[0] for c in API])
def test_api_bad_input(api: Api, case: tuple) -> None:
    """The Python API raises the project's own error of the case's class (a QgpuError; an
    ArgumentTypeError is a TypeError too), its message naming the cause, in time."""
    name, call, cls, needle = case
    if name.startswith("ok-") and api.ok is None:
        pytest.skip("needs a CUDA compiler")
    t0 = time.perf_counter()
    with time_limit(2 * CASE_SECONDS), pytest.raises(QgpuError) as info:
        call(api)
    skip_without_compiler(str(info.value))
    assert type(info.value).__name__ == cls, info.value
    assert needle in str(info.value)
    assert cls != "ArgumentTypeError" or isinstance(info.value, TypeError)
    assert time.perf_counter() - t0 < CASE_SECONDS


# --- what the corpus does not show ---------------------------------------------------------------


needs_compiler = pytest.mark.skipif(not available_compilers(), reason="no CUDA compiler")


@needs_compiler
def test_warnings_are_shown_and_do_not_fail(capsys: pytest.CaptureFixture[str]) -> None:
    warn = str(FILES / "warn.cu")
    assert main(["run", warn, "--grid", "1", "--block", "1", "--args", "[[0]]"]) == 0
    assert "warning: warn.cu(3): warning" in capsys.readouterr().err
    assert main(["run", warn, "--grid", "1", "--block", "1", "--args", "[[0]]", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["args"] == [[1]] and '"x" was declared but never referenced' in out["warnings"][0]
    # the error object of a launch that fails after the compile carries them too
    assert main(["run", warn, "--grid", "1", "--block", "4", "--args", "[[0]]", "--json"]) == 2
    out = json.loads(capsys.readouterr().out)
    assert out["error"]["kind"] == "launch" and len(out["warnings"]) == 1


@needs_compiler
def test_a_byte_order_mark_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "bom.cu"
    path.write_bytes(b"\xef\xbb\xbf" + (FILES / "ok.cu").read_bytes())
    result = compile_file(path).kernel().launch(grid=(1, 1), block=(4, 1), args=[[1, 2], 2])
    assert result.args == [[2, 3], 2]
    assert load_ptx("\ufeff" + (ROOT / "kernels" / "ptx" / "dot.ptx").read_text()).kernel_names


@needs_compiler
def test_a_compile_past_the_time_limit_is_stopped() -> None:
    """A source that makes NVRTC work for minutes (exponential inlining) is stopped at the
    limit, and the next compile gets a fresh worker."""
    slow = ("template <int N> struct F { static __device__ __forceinline__ int f(int x) "
            "{ return F<N - 1>::f(x) * 3 + F<N - 2>::f(x ^ N); } };\n"
            "template <> struct F<0> { static __device__ int f(int x) { return x; } };\n"
            "template <> struct F<1> { static __device__ int f(int x) { return x + 1; } };\n"
            'extern "C" __global__ void k(int* a) { a[0] = F<40>::f(a[0]); }\n')
    t0 = time.perf_counter()
    with pytest.raises(ResourceError, match="compile time limit of 1 s"):
        compile_cuda(slow, filename="slow.cu", time_limit=1)
    assert time.perf_counter() - t0 < 10
    assert compile_cuda((FILES / "ok.cu").read_text()).ptx


def test_an_unexpected_failure_is_one_error_object(capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug is kind internal, exit status 2, no traceback unless QGPU_TRACEBACK is set;
    Ctrl-C is exit status 130."""
    def boom(*args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(qgpu.cli, "_run", boom)
    argv = ["run", str(DOT), "--grid", "1", "--block", "4", "--args", DOT_ARGS, "--json"]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert json.loads(out)["error"]["kind"] == "internal" and "boom" in out
    assert "Traceback" not in err
    monkeypatch.setenv("QGPU_TRACEBACK", "1")
    assert main(argv) == 2 and "Traceback" in capsys.readouterr().err

    def interrupt(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(qgpu.cli, "_run", interrupt)
    assert main(argv) == 130 and capsys.readouterr().err == "interrupted\n"


def qgpu_process(*argv: str | bytes, **kw: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qgpu", *argv], cwd=ROOT, capture_output=True,
                          timeout=120, check=False, **kw)


def test_process_exit_status_and_streams() -> None:
    """A real process: status 2, the error on stderr (stdout empty), or with --json the
    object on stdout (stderr empty); never a traceback."""
    proc = qgpu_process("run", str(DOT), "--grid", "0", "--block", "4", "--args", DOT_ARGS)
    assert proc.returncode == 2 and proc.stdout == b""
    assert proc.stderr.startswith(b"error (usage): grid must be")
    proc = qgpu_process("suite", "--seeds", "0")
    assert proc.returncode == 2 and b"--seeds" in proc.stderr and b"Traceback" not in proc.stderr
    proc = qgpu_process("run", str(DOT), "--grid", "1", "--block", "4", "--args", "[",
                        "--json")
    assert proc.returncode == 2 and proc.stderr == b""
    assert json.loads(proc.stdout)["error"]["kind"] == "usage"


@pytest.mark.skipif(os.name != "posix", reason="bytes on the command line")
@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_non_utf8_bytes_on_the_command_line(json_flag: list[str]) -> None:
    for args, said in (([b"caf\xe9.cu", "--args", "[]"], b"no such file: caf"),
                       ([str(DOT), "--args", b"[\xff]"], b"not valid JSON")):
        proc = qgpu_process("run", *args, "--grid", "1", "--block", "1", *json_flag)
        assert proc.returncode == 2 and b"Traceback" not in proc.stderr
        assert said in proc.stdout + proc.stderr


@pytest.mark.skipif(os.name != "posix", reason="SIGPIPE exit status")
def test_a_closed_stdout_ends_quietly() -> None:
    """``python -m qgpu asm FILE | head``: the reader has gone when qgpu writes; exit status 141
    like a Unix tool, nothing on stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "qgpu", "asm", str(DOT)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # before qgpu writes anything
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141 and err == b""
