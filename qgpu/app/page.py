"""The Gradio page: a header saying what is loaded, and tabs — the CUDA tab (``cuda_tab.py``)
and the chat tab (``chat_tab.py``: a chat whose numbers come from launches on the same model,
each launch openable in the CUDA tab's views). ``create_app(host)`` builds it;
``launch_options()`` holds what Gradio 6 takes at ``launch`` (theme, css).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gradio as gr

from qgpu.app import chat_tab, panels
from qgpu.app.cuda_tab import CudaTab
from qgpu.app.host import ModelHost
from qgpu.app.plotpanel import static_paths

if TYPE_CHECKING:
    from qgpu.chat.generate import Generator

INTRO = ("# qgpu — CUDA on a GPU compiled into Qwen3.5's weights\n"
         "The host compiles your kernel (CUDA → PTX → machine blocks) and feeds program and "
         "inputs as prompt tokens; **the model writes the launch itself**, one token per step, "
         "and every result and every view below is read from the model's recurrent state.")

CSS = panels.STYLE + chat_tab.CSS + """
#model-banner {background: #fff9db; border: 1px solid #ffe066; border-radius: 8px;
  padding: 2px 12px;}
#model-header {font-size: 14px;}
#token-caption {font-size: 14px; min-height: 1.6em;}
#cuda-tokens textarea, #cuda-prompt textarea {font-family: ui-monospace, SFMono-Regular, Menlo,
  monospace; font-size: 12px;}
"""


def launch_options() -> dict[str, Any]:
    """What Gradio 6 takes at ``demo.launch`` rather than in ``gr.Blocks``."""
    return {"theme": gr.themes.Soft(primary_hue="orange", secondary_hue="blue"), "css": CSS,
            "ssr_mode": False}


def create_app(host: ModelHost, chat_generator: Generator | None = None) -> gr.Blocks:
    """The whole page over one loaded model. `chat_generator`: the chat's language model
    (default: the build's text path, loaded at the first message); tests pass a
    ``generate.ScriptedModel`` so the text is known and the launches are real."""
    gr.set_static_paths(static_paths())
    with gr.Blocks(title="qgpu — CUDA on a GPU inside Qwen3.5", fill_width=True,
                   analytics_enabled=False) as demo:  # no telemetry, no version check
        gr.Markdown(INTRO)
        gr.Markdown(host.header_markdown(), elem_id="model-header")
        banner = host.banner_markdown()
        if banner:
            gr.Markdown(banner, elem_id="model-banner")
        with gr.Tabs(elem_id="tabs") as tabs:
            with gr.Tab("CUDA", id="cuda", elem_id="tab-cuda"):
                cuda = CudaTab(host)
                cuda.build()
            with gr.Tab("Chat", id="chat", elem_id="tab-chat"):
                chat_tab.ChatTab(host, cuda, chat_generator).build(tabs)
    demo.queue(default_concurrency_limit=1)
    return demo
