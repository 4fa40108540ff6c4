"""An exported ONNX model as posexport reads it, below both surgery and verdicts: its graph with producers and
consumers (graph.py), its external data read by offset (external.py), the onnxruntime-genai folder it may sit in
(genai.py), and the fused ops that read cos/sin caches (fused.py)."""
