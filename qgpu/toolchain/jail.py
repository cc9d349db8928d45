"""A private view of the filesystem for a compiler of untrusted source (Linux namespaces).

A compiler run on a user's CUDA opens whatever its preprocessor is told to: ``#include
"/etc/passwd"``, ``__has_include`` of any path, ``#embed``. Scanning the source cannot match the
preprocessor's reading (form feeds, splices, digraphs, macros...), so the compiler is started
in a new user, mount, network and IPC namespace whose root is an empty tmpfs holding only
bind mounts of what compiling needs — the system's ``/usr`` (compilers, their libraries, the
system headers), the CUDA headers, the compiler's installation — and a scratch directory for
the source and the PTX. Every other path (``/etc``, ``/home``, ``/proc``, ``/tmp``, the app's
own files) does not exist in that view: an existing and a missing secret answer alike
(docs/SECURITY.md). No privilege is needed where the kernel allows unprivileged user
namespaces; ``available()`` says whether it does here.
"""

from __future__ import annotations

import ctypes
import functools
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence

_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWNET, _CLONE_NEWIPC = 0x20000, 0x10000000, 0x40000000, \
    0x08000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = \
    1, 2, 4, 32, 4096, 16384, 1 << 18

SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
                "/etc/alternatives", "/dev/null")
"""What every compiler needs to run: programs, shared libraries (``/lib`` and friends are
links into ``/usr`` on merged-/usr systems, recreated as links), Debian's alternatives links
(``cc``), and ``/dev/null``. Nothing else of ``/etc`` (no ld.so.cache: the loader falls back
to its built-in directories), no ``/proc``, no home, no temporary directory."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def enter(visible: Sequence[str], workdir: str, root: str) -> None:
    """Make this process's root an empty tmpfs at ``root`` holding ``visible`` (read-only bind
    mounts; ``workdir`` writable) and chdir to ``workdir``. Runs in the child between fork and
    exec (``preexec``)."""
    libc = _libc()
    uid, gid = os.getuid(), os.getgid()

    def mount(source: str | None, target: str, fstype: str | None, flags: int,
              data: str | None = None) -> None:
        _check(libc.mount(source and source.encode(), target.encode(),
                          fstype and fstype.encode(), ctypes.c_ulong(flags),
                          data and data.encode()), f"mount {target}")

    _check(libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWNET | _CLONE_NEWIPC),
           "unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                       ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)
    mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    mount("tmpfs", root, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,mode=755")
    for path in visible:
        target = root + path
        if os.path.islink(path):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if not os.path.lexists(target):
                os.symlink(os.readlink(path), target)
            continue
        if not os.path.exists(path):
            continue
        if os.path.isdir(path):
            os.makedirs(target, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            open(target, "w").close()
        mount(path, target, None, _MS_BIND | _MS_REC)
        if path != workdir:  # best effort: a locked mount may refuse the read-only remount
            try:
                mount(None, target, None,
                      _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
            except OSError:
                pass
    os.chroot(root)
    os.chdir(workdir)


def preexec(visible: Sequence[str], workdir: str, root: str,
            memory_limit: int | None = None) -> Callable[[], None]:
    """A ``preexec_fn`` that enters the jail (and caps the address space at ``memory_limit``
    bytes); any failure ends the child with status 126 before the compiler runs."""

    def run() -> None:
        try:
            if memory_limit is not None:
                limit_memory(memory_limit)
            enter([*visible, workdir], workdir, root)
        except BaseException as exc:  # noqa: BLE001 — never exec the compiler unconfined
            os.write(2, f"qgpu jail: {exc}\n".encode(errors="replace"))
            os._exit(126)

    return run


def limit_memory(limit: int) -> None:
    """Cap this process's address space (the compilers inherit it)."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


@functools.cache
def available() -> bool:
    """Whether this kernel lets this user enter the jail (tried once, with ``/bin/true``)."""
    if not sys.platform.startswith("linux"):
        return False
    with tempfile.TemporaryDirectory(prefix="qgpu-jail-") as tmp:
        work, root = os.path.join(tmp, "work"), os.path.join(tmp, "root")
        os.mkdir(work)
        os.mkdir(root)
        try:
            proc = subprocess.run(["true"], cwd=work, env={"PATH": "/usr/bin:/bin"},
                                  preexec_fn=preexec(SYSTEM_PATHS, work, root),
                                  capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.SubprocessError):
            return False
        return proc.returncode == 0
