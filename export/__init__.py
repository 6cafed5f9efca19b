"""headseg.export — ONNX export of the selected heads and an onnxruntime backend."""
