"""A user probing a server for its files: every way we know to make a compiler open a planted
secret, on every compiler route and confinement this machine has. Each attack runs against an
existing secret and a missing twin path: no byte of the secret may reach any output (error,
warning, PTX), and both must answer the same (a server must not tell whether a path exists).

The attacks run twice: through ``compile_cuda`` as the app calls it (the include scan first),
and with the scan switched off, so that the confinement alone is what holds (docs/SECURITY.md).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import qgpu
from qgpu.errors import QgpuError
from qgpu.toolchain import cuda, jail, nvrtc_worker

KERNEL = '\nextern "C" __global__ void probe(int *p) { p[0] = 1; }\n'
DEEP = "../" * 24  # from any include directory up to /


def attacks() -> list[tuple[str, str]]:
    """(name, source template): {p} is the secret's absolute path (its missing twin's has as
    many characters, so carets line up alike), {rel} the same relative to
    an include directory, {link} a symlink to it, {spliced} the path with a line splice."""
    plain = [
        ("quoted", '#include "{p}"'), ("angled", "#include <{p}>"),
        ("spaces", '  #  include   "{p}"'), ("tabs", '\t#\tinclude\t"{p}"'),
        ("trailing comment", '#include "{p}" // ok'),
        ("form feed before #", '\f#include "{p}"'), ("form feed after #", '#\finclude "{p}"'),
        ("vertical tab before #", '\v#include "{p}"'),
        ("vertical tab after #", '#\vinclude "{p}"'),
        ("carriage return line", 'int a;\r#include "{p}"'),
        ("carriage return before #", '\r#include "{p}"'),
        ("no-break space", '\u00a0#include "{p}"'), ("line separator", '\u2028#include "{p}"'),
        ("byte-order mark", '\ufeff#include "{p}"'),
        ("mid-file byte-order mark", 'int b;\n\ufeff#include "{p}"'),
        ("NUL before #", '\0#include "{p}"'),
        ("splice in the name", '#in\\\nclude "{p}"'),
        ("splice before the path", '#include\\\n"{p}"'),
        ("splice in the path", '#include "{spliced}"'),
        ("comment inside", '#/**/include "{p}"'), ("comment before", '/**/#include "{p}"'),
        ("comment before the path", '#include/**/"{p}"'),
        ("multi-line comment", '/*\n*/ #include "{p}"'),
        ("digraph", '%:include "{p}"'), ("digraph, space", '%: include <{p}>'),
        ("trigraph", '??=include "{p}"'),
        ("digit separator hides a comment", "int d = 1'2; // '\n#include \"{p}\""),
        ("digit separator opens a char", "int e = 0x1'0;\n#include \"{p}\" // '"),
        ("escaped quote char", "char c = '\\'';\n#include \"{p}\""),
        ("raw string", 'const char *r = R"x( )x";\n#include "{p}"'),
        ("raw string with lines", 'const char *s = R"(\n#include "nothing"\n)";\n#include "{p}"'),
        ("macro string", '#define P "{p}"\n#include P'),
        ("macro angle", "#define P <{p}>\n#include P"),
        ("stringized path", "#define S(x) #x\n#define X(x) S(x)\n#include X({p})"),
        ("include_next quoted", '#include_next "{p}"'),
        ("include_next angled", "#include_next <{p}>"),
        ("import", '#import "{p}"'),
        ("line then __FILE__", '#line 1 "{p}"\n#include __FILE__'),
        ("line then an error", '#line 1 "{p}"\nint broken = ;'),
        ("embed", 'const char d[] = {{\n#embed "{p}"\n}};'), ("embed angled", "#embed <{p}>"),
        ("pragma dependency", '#pragma GCC dependency "{p}"'),
        ("_Pragma dependency", '_Pragma("GCC dependency \\"{p}\\"")'),
        ("incbin", '__device__ void f() {{ asm(".incbin \\"{p}\\""); }}'),
        ("dot-dot in angle brackets", "#include <{rel}>"), ("dot-dot quoted", '#include "{rel}"'),
        ("dot-dot under a CUDA header dir", "#include <cuda/std/{rel}>"),
        ("symlink", '#include "{link}"'),
        ("/proc/self/root", '#include "/proc/self/root{p}"'),
        ("double slashes", '#include "/{p}"'), ("dot segments", '#include "{dots}"'),
        ("very long path", '#include "{long}"'),
        ("has_include quoted", '#if __has_include("{p}")\n#error found\n#endif'),
        ("has_include angled", "#if __has_include(<{p}>)\nint found;\n#else\nint missing;\n#endif"),
        ("has_include relative", '#if __has_include("{rel}")\n#error found\n#endif'),
        ("has_include through a macro",
         '#define H(x) __has_include(x)\n#if H("{p}")\n#error found\n#endif'),
        ("has_include_next", '#if __has_include_next("{p}")\n#error found\n#endif'),
        ("inside #ifdef __CUDACC__", '#ifdef __CUDACC__\n#include "{p}"\n#endif'),
        ("after a CUDA header", '#include <cuda_runtime.h>\n#include "{p}"'),
    ]  # fmt: skip
    return plain


SERVER_FILES = [
    ('#include "/etc/passwd"', "root:"), ('#include "/etc/hostname"', None),
    ('#include "/proc/self/environ"', "QGPU_PROBE_SECRET"),
    ('#include "/proc/self/cmdline"', None), ('#include "/proc/self/maps"', None),
    ('#include "/dev/stdin"', None), ('#include "/dev/fd/0"', None),
    ('#include "/proc/self/fd/0"', None), ('#include "/dev/zero"', None),
    ('#include "/dev/urandom"', None), ('#include "/dev/tty"', None),
    (f'#include "{Path(qgpu.__file__).resolve()}"', "qgpu compiles"),
    # next to qgpu's own headers (an include folder of NVRTC and clang): qgpu's source
    ("#include <../cuda.py>", "def compile_cuda"), ("#include <../nvrtc_worker.py>", "def main"),
    ("#include <../../__init__.py>", "qgpu compiles"),
]
"""The server's own files: nothing of them may show, reading them must not hang."""

ROUTES = [("nvrtc", "landlock"), ("nvrtc", "namespace"), ("nvcc", "namespace"),
          ("clang", "namespace")]


def _route_available(compiler: str, how: str) -> str | None:
    """Why the route cannot be tested here, or None."""
    if compiler not in cuda.available_compilers():
        return f"{compiler} is not available here"
    if how == "landlock" and nvrtc_worker.landlock_abi() < 1:
        return "this kernel has no Landlock"
    if how == "namespace" and not jail.available():
        return "this kernel allows no unprivileged user namespaces"
    return None


def _restart_nvrtc() -> None:
    with cuda._NVRTC_LOCK:
        if cuda._WORKER is not None:
            cuda._WORKER.stop()
            cuda._WORKER = None
    cuda._load_nvrtc.cache_clear()


@pytest.fixture(params=ROUTES, ids=[f"{c}-{h}" for c, h in ROUTES], scope="module")
def route(request: pytest.FixtureRequest) -> Iterator[str]:
    """A compiler confined one way (QGPU_CONFINE set for the module's tests)."""
    compiler, how = request.param
    why = _route_available(compiler, how)
    if why:
        pytest.skip(why)
    old = os.environ.get("QGPU_CONFINE")
    os.environ["QGPU_CONFINE"] = how
    _restart_nvrtc()
    try:
        assert cuda.confinement(compiler).startswith(how)
        yield compiler
    finally:
        if old is None:
            del os.environ["QGPU_CONFINE"]
        else:
            os.environ["QGPU_CONFINE"] = old
        _restart_nvrtc()


@pytest.fixture(scope="module")
def planted() -> Iterator[dict[str, str]]:
    """A secret file whose every line would show in a compiler's error or PTX, and the paths
    an attack names it by; the same for a missing twin. In a short folder of its own: an error
    quotes a long path only in part, and the part must be the same for both twins wherever
    pytest keeps its temporary files."""
    marker = f"qgpu_secret_{secrets.token_hex(6)}"
    folder = Path(tempfile.mkdtemp(prefix="qgpu-secrets-"))
    secret = folder / "secret.h"
    secret.write_text(f'{marker} = "{marker}";\n__device__ int {marker}_v = 7;\n#error {marker}\n')
    os.symlink(secret, folder / "linked.h")
    os.environ["QGPU_PROBE_SECRET"] = marker  # in this process's environment only

    def paths(p: Path) -> dict[str, str]:
        s = str(p)
        return {"p": s, "rel": DEEP + s.lstrip("/"), "link": str(p.with_name("linked.h"))
                if p.exists() else str(p.with_name("nolink.h")),
                "spliced": s[:5] + "\\\n" + s[5:], "dots": "/." * 40 + s,
                "long": "/" + "./" * 1500 + s.lstrip("/")}

    yield {"marker": marker, "existing": paths(secret), "missing": paths(folder / "absent.h")}
    shutil.rmtree(folder, ignore_errors=True)


def _answer(source: str, compiler: str, scan: bool, monkeypatch: pytest.MonkeyPatch) -> str:
    """What a user sees: the PTX, or the error's kind and message."""
    with monkeypatch.context() as m:
        if not scan:
            m.setattr(cuda, "check_includes", lambda source, filename: None)
        try:
            result = cuda.compile_cuda(source + KERNEL, filename="kernel.cu", compiler=compiler,
                                       untrusted=True, time_limit=30)
            return f"ok\n{result.ptx}\n{result.log}"
        except QgpuError as exc:
            return f"{exc.kind}\n{exc.message}"


def _same(answer: str, paths: dict[str, str]) -> str:
    """The answer with the attack's own path text replaced (the user wrote it)."""
    for key in ("long", "dots", "spliced", "rel", "link", "p"):
        answer = answer.replace(paths[key], f"<{key}>")
    answer = answer.replace("nolink.h", "linked.h").replace("absent.h", "secret.h")
    return re.sub(r"\.version \S+|// .*", "", answer)


@pytest.mark.parametrize(("name", "template"), attacks(), ids=[n for n, _ in attacks()])
def test_no_attack_reads_or_detects_a_secret(route: str, planted: dict, name: str,
                                              template: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # the scan runs before any compiler: with it once (on NVRTC), without it on every route
    for scan in (False, True) if route == "nvrtc" else (False,):
        answers = {}
        for which in ("existing", "missing"):
            paths = planted[which]
            answer = _answer(template.format(**paths), route, scan, monkeypatch)
            assert planted["marker"] not in answer, f"{name}: the secret leaked:\n{answer[:2000]}"
            answers[which] = _same(answer, paths)
        assert answers["existing"] == answers["missing"], \
            f"{name} (scan {scan}): an existing and a missing file answer differently"


@pytest.mark.parametrize(("source", "content"), SERVER_FILES, ids=[s for s, _ in SERVER_FILES])
def test_no_server_file_shows_and_none_hangs(route: str, source: str, content: str | None,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    answer = _answer(source, route, False, monkeypatch)
    assert answer.startswith("compile\n"), answer[:500]
    if content is not None:
        assert content not in answer
    assert re.search(r"cannot open source file|No such file|file not found", answer), \
        answer[:500]


QGPU_HEADERS = ["stdio.h", "math.h", "cmath", "assert.h", "stdint.h", "cstdint", "float.h",
                "limits.h", "stdlib.h", "string.h", "iostream"]


def test_suite_kernels_and_cuda_headers_compile_confined(route: str) -> None:
    """The CUDA headers (clang has none but cuda_runtime.h) and qgpu's C library headers."""
    includes = "".join(f"#include <{h}>\n" for h in ["cuda_runtime.h", *QGPU_HEADERS])
    if route == "clang":
        source = includes + ('extern "C" __global__ void k(int *p) { p[threadIdx.x] = INT_MAX; '
                             'printf("%d", (int)sqrtf(2.0f)); }\n')
    else:
        source = (includes + "#include <cooperative_groups.h>\n"
                  "namespace cg = cooperative_groups;\n"
                  'extern "C" __global__ void k(int *p) { '
                  "p[cg::this_thread_block().thread_rank()] = INT_MAX; "
                  'printf("%d", (int)sqrtf(2.0f)); }\n')
    result = cuda.compile_cuda(source, compiler=route, untrusted=True)
    assert ".entry k(" in result.ptx and "vprintf" in result.ptx


def test_the_nvrtc_worker_reads_the_header_folders_and_no_more_of_qgpu(route: str) -> None:
    """Landlock: the worker's rules are exactly the header folders (the CUDA wheels' and
    qgpu's own include/). Namespace jail: of qgpu's files only include/ is mounted (the worker
    runs from -c's text, not from its file)."""
    if route != "nvrtc":
        pytest.skip("the NVRTC worker")
    cuda.compile_cuda(KERNEL, compiler="nvrtc", untrusted=True)
    pid = cuda._WORKER.proc.pid
    if not Path(f"/proc/{pid}").exists():
        pytest.skip("needs /proc")
    package = str(Path(qgpu.__file__).resolve().parent)
    if os.environ["QGPU_CONFINE"] == "landlock":
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        rules = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--landlock"]
        assert rules == [*cuda.cuda_include_dirs(), str(cuda.QGPU_INCLUDE)]
        assert rules == list(cuda.nvrtc_header_dirs())
    else:
        mounts = [line.split()[4] for line in Path(f"/proc/{pid}/mountinfo").read_text()
                  .splitlines()]
        assert str(cuda.QGPU_INCLUDE) in mounts
        ours = [m for m in mounts if m == package or m.startswith(package + "/")]
        assert ours == [str(cuda.QGPU_INCLUDE)], mounts


def test_the_worker_can_neither_write_nor_connect() -> None:
    """Landlock in the NVRTC worker denies more than reads: checked in a child that restricts
    itself as the worker does."""
    if nvrtc_worker.landlock_abi() < 1 or not cuda.cuda_include_dirs():
        pytest.skip("no Landlock or no CUDA headers here")
    import subprocess
    import sys

    headers = list(cuda.cuda_include_dirs())
    probe = (
        "import socket, sys\n"
        f"sys.path.insert(0, {str(Path(nvrtc_worker.__file__).parent)!r})\n"
        "import nvrtc_worker as w\n"
        f"w.landlock_read_only({headers!r})\n"
        "for what, act in [('read', lambda: open('/etc/passwd').read()),\n"
        "                  ('write', lambda: open('/tmp/qgpu-landlock-probe', 'w')),\n"
        "                  ('connect', lambda: socket.create_connection(('127.0.0.1', 9), 1))]:\n"
        "    try:\n        act(); print(what, 'allowed')\n"
        "    except OSError as e:\n        print(what, 'denied', e.errno)\n"
        f"print(len(open({str(Path(headers[0], 'cuda_runtime.h'))!r}).read()) > 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert "read denied 13" in out and "write denied 13" in out
    assert "connect denied" in out or "connect allowed" not in out
    assert out.strip().endswith("True")


def test_an_unconfinable_route_refuses_untrusted_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    if "nvcc" not in cuda.available_compilers():
        pytest.skip("nvcc is not available here")
    monkeypatch.setenv("QGPU_CONFINE", "none")
    with pytest.raises(QgpuError, match="cannot be confined on this machine"):
        cuda.compile_cuda(KERNEL, compiler="nvcc", untrusted=True)
    assert ".entry probe(" in cuda.compile_cuda(KERNEL, compiler="nvcc").ptx  # the CLI's own file


def test_the_compiler_gets_none_of_the_servers_environment(route: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """CPATH would add an include directory; secrets live in environment variables."""
    monkeypatch.setenv("CPATH", "/etc")
    answer = _answer('#include "passwd"', route, False, monkeypatch)
    assert "root:" not in answer and answer.startswith("compile\n")


def test_the_worker_has_a_memory_limit() -> None:
    if "nvrtc" not in cuda.available_compilers() or not Path("/proc/self/limits").exists():
        pytest.skip("needs NVRTC and /proc")
    cuda.compile_cuda(KERNEL, compiler="nvrtc")
    limits = Path(f"/proc/{cuda._WORKER.proc.pid}/limits").read_text()
    line = next(x for x in limits.splitlines() if x.startswith("Max address space"))
    assert str(cuda.COMPILE_MEMORY_LIMIT) in line


def test_the_app_says_what_compiles_pasted_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    if not cuda.available_compilers():
        pytest.skip("no compiler here")
    monkeypatch.setenv("QGPU_CONFINE", "none")
    assert cuda.serving_compiler().startswith("none: no compiler can be confined here")
    monkeypatch.setenv("QGPU_CONFINE", "namespace")
    if jail.available():
        assert cuda.serving_compiler().endswith("confined by namespace")
