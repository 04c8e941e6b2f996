"""torchlint: a static analyzer for PyTorch code, with autofixes."""

__version__ = "0.1.0"
