"""Many users at once on the one model: each gets their own exact result, a short launch is not
held behind long ones (their steps take turns), one user's Stop stops only their launch, and a
session's launches are capped."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest

from qgpu.app.launches import Prepared, Request, execute, prepare
from qgpu.errors import ResourceError

from .test_cuda_tab import example

DOT = open("kernels/dot.cu").read()
pytestmark = pytest.mark.slow


def test_sixteen_api_users_each_get_their_own_exact_result(server) -> None:
    from gradio_client import Client

    def user(k: int) -> tuple[int, dict]:
        client = Client(server, verbose=False)  # a session of its own
        a, b = [k, k + 1, k + 2], [3, 2, k]
        out = client.predict(DOT, "dot", "1", "4", json.dumps([a, b, {"zeros": 1}, 3]), 0, True,
                             api_name="/run_cuda")
        return sum(x * y for x, y in zip(a, b, strict=True)), out

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(user, range(16)))
    for want, out in results:
        assert out["args"][2] == [want] and out["exact"] is True, out


def _long() -> Prepared:
    """A launch that runs until the token limit (a loop that never ends)."""
    f = example("spin")
    return prepare(Request.parse(f["source"], f["kernel"], f["grid"], f["block"], f["args"]))


def test_a_short_launch_is_not_held_behind_long_ones(host) -> None:
    """4 long launches run; a dot product started after them ends while every one of them is
    still running (with one lock per launch it would wait for all four)."""
    long = _long()
    short = prepare(Request.parse(DOT, "dot", "1", "4", "[[1,2,3],[4,5,6],{\"zeros\":1},3]"))
    done: dict[str, float] = {}

    def run(name: str, prep: Prepared, limit: int) -> None:
        try:
            execute(host.gm, host.slots, prep.launch, limit)
        except Exception:  # noqa: BLE001 — the long ones end at their token limit
            pass
        done[name] = time.perf_counter()

    threads = [threading.Thread(target=run, args=(f"long{i}", long, 1500)) for i in range(4)]
    for t in threads:
        t.start()
    time.sleep(1.0)  # the long ones are generating
    t0 = time.perf_counter()
    run("short", short, 1000)
    assert not any(name.startswith("long") for name in done), done
    for t in threads:
        t.join()
    assert all(done[f"long{i}"] > done["short"] for i in range(4))
    assert done["short"] - t0 < min(done[f"long{i}"] for i in range(4)) - t0


def test_one_users_stop_stops_only_their_launch(tab) -> None:
    f = example("spin")
    me, other = SimpleNamespace(session_hash="me"), SimpleNamespace(session_hash="other")
    mine = tab.run(f["source"], f["kernel"], f["grid"], f["block"], f["args"], 0, False, 400,
                   request=me)
    theirs = tab.run(f["source"], f["kernel"], f["grid"], f["block"], f["args"], 0, False, 400,
                     request=other)
    next(mine), next(theirs)
    threading.Timer(0.5, tab.stop, kwargs={"request": me}).start()
    with ThreadPoolExecutor(2) as pool:
        mine_out, theirs_out = pool.map(list, [mine, theirs])
    assert "Stopped by you after" in mine_out[-1][0]
    assert "Stopped by you" not in theirs_out[-1][0]
    assert "400" in theirs_out[-1][0]  # it ran on to its own token limit


def test_a_session_has_at_most_its_share_of_launches(host) -> None:
    with host.session_launch("s"), host.session_launch("s"):
        with pytest.raises(ResourceError, match="at most 2 at once"):
            with host.session_launch("s"):
                pass
        with host.session_launch("another"):
            pass
    with host.session_launch("s"):
        pass


def test_the_queue_position_is_reported(one_slot_server) -> None:
    """Beyond the slots, a request waits in Gradio's queue and its status carries its place
    (the page shows it over the result as "queue: N/M")."""
    from gradio_client import Client

    f = example("spin")
    clients = [Client(one_slot_server, verbose=False) for _ in range(3)]
    jobs = [c.submit(f["source"], f["kernel"], f["grid"], f["block"], f["args"], 0, False,
                     api_name="/run_cuda") for c in clients]
    ranks = set()
    deadline = time.time() + 60
    while time.time() < deadline and not all(j.done() for j in jobs):
        for j in jobs:
            status = j.status()
            if status.rank is not None and status.code.name == "IN_QUEUE":
                ranks.add(status.rank)
        if ranks:
            break
        time.sleep(0.05)
    for j in jobs:
        j.result()
    assert ranks, "no request waiting for the slot showed a queue position"

