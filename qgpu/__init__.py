"""qgpu: a small SIMT GPU compiled into the weights of a Qwen3.5 language model."""

__version__ = "0.1.0"
