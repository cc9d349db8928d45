"""The web app (``python app.py``): the page (page.py: the CUDA tab, cuda_tab.py, and the chat
tab, chat_tab.py) over one shared model (host.py); the launch service behind it and the
``run_cuda`` API (launches.py); one launch's tokens and per-token machine state (recording.py)
and its plotly views (views.py); text panels (panels.py); the examples picker (examples.py);
Hugging Face Spaces helpers (space.py). docs/APP.md describes it."""
