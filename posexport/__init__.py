"""posexport: positional encodings as ONNX graphs, checked against a float64 oracle on every runtime."""

__version__ = "0.1.0"
