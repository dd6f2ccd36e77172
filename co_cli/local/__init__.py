"""The embedded local model (llama.cpp's engine on a GGUF file); import ``co_cli.local.model`` only when used."""

from co_cli.local.weights import default_weights_path, local_model_available, resolve_weights

__all__ = ["default_weights_path", "local_model_available", "resolve_weights"]
