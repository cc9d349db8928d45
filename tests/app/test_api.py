"""The app as a service: gradio_client against the app served in-process — ``run_cuda`` returns
the CLI's JSON object (the dot product's [32]) or its error object, and is the only documented
endpoint."""

from __future__ import annotations

import pytest

from qgpu.app.examples import DEFAULT

gradio_client = pytest.importorskip("gradio_client")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning",
                                         "ignore:.*(no_silent_downcasting|copy keyword)")


@pytest.fixture(scope="module")
def client(server):
    return gradio_client.Client(server, verbose=False)


def test_run_cuda_returns_the_dot_product(client) -> None:
    f = DEFAULT.fields()
    out = client.predict(f["source"], f["kernel"], f["grid"], f["block"], f["args"],
                         f["dynamic_shared"], api_name="/run_cuda")
    assert out["args"][2] == [32]
    assert (out["kernel"], out["backend"], out["generated_tokens"]) == ("dot", "model", 30)
    assert "exact" not in out
    checked = client.predict(f["source"], f["kernel"], f["grid"], f["block"], f["args"],
                             f["dynamic_shared"], True, api_name="/run_cuda")
    assert checked["exact"] is True and checked["args"] == out["args"]


def test_run_cuda_reports_errors_as_the_cli_does(client) -> None:
    out = client.predict('extern "C" __global__ void k(int* a) { a[0] = }', "", "1", "1",
                         "[[0]]", 0, api_name="/run_cuda")
    assert out["error"]["kind"] == "compile" and "kernel.cu(1)" in out["error"]["message"]


def test_only_run_cuda_is_documented(client) -> None:
    api = client.view_api(print_info=False, return_format="dict")
    assert list(api["named_endpoints"]) == ["/run_cuda"]
    params = [p["parameter_name"] for p in api["named_endpoints"]["/run_cuda"]["parameters"]]
    assert params == ["source", "kernel", "grid", "block", "args", "dynamic_shared", "verify"]
