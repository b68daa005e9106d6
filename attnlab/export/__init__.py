"""ONNX export of a trained reader: the graphs, the NumPy reference loop, the parity check."""
