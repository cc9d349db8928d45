"""What the app's tests share: the model host over the session's tiny build (tests/conftest.py),
one CUDA tab whose event functions tests call directly, the dot product's recording, scripted
assistant turns for the chat, and the app served in-process (for gradio_client and the browser,
its chat scripted to answer the dot-product question with a gpu_calc call)."""

from __future__ import annotations

import pytest

from qgpu.app.examples import DEFAULT
from qgpu.app.host import ModelHost


@pytest.fixture(scope="session")
def host(gpu) -> ModelHost:
    h = ModelHost(gpu, "tiny", True, gpu.path)
    return h


@pytest.fixture(scope="session")
def tab(host):
    from qgpu.app.cuda_tab import CudaTab

    return CudaTab(host)


def tool_call(name: str = "gpu_calc", **params) -> str:
    """An assistant's tool call as Qwen3.5 writes it."""
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


DOT_TURNS = ["I'll compute it on the GPU.\n" + tool_call(expression="dot([1, 2, 3], [4, 5, 6])"),
             "The dot product of [1, 2, 3] and [4, 5, 6] is **32**."]
"""The assistant's two rounds for "dot of [1,2,3] and [4,5,6]": a gpu_calc call, the answer."""


def run_to_end(tab, fields: dict, check: bool = False, limit=None) -> list[tuple]:
    """Every update the Run button's generator yields."""
    return list(tab.run(fields["source"], fields["kernel"], fields["grid"], fields["block"],
                        fields["args"], fields["dynamic_shared"], check, limit))


@pytest.fixture(scope="session")
def dot_run(tab) -> list[tuple]:
    """The dot product run from the page (verified)."""
    return run_to_end(tab, DEFAULT.fields(), check=True)


@pytest.fixture(scope="session")
def server(host):
    """The whole app served on a free local port."""
    from qgpu.app.page import create_app, launch_options
    from qgpu.chat.generate import ScriptedModel

    demo = create_app(host, chat_generator=ScriptedModel(DOT_TURNS))
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", quiet=True,
                **launch_options())
    yield demo.local_url
    demo.close()


@pytest.fixture(scope="module")
def one_slot_server(gpu):
    """The app over a host with one launch slot and a 2,000-token limit: a second launch waits
    in the queue while a runaway one runs."""
    from qgpu.app.page import create_app, launch_options

    host = ModelHost(gpu, "tiny", True, gpu.path, token_limit=2000, max_concurrent=1)
    demo = create_app(host)
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", quiet=True,
                **launch_options())
    yield demo.local_url
    demo.close()
