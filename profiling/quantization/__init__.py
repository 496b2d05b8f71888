"""The quantization experiment: one model at several precisions, measured side by side."""
