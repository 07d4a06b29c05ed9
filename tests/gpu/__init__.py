"""Real-GPU tests (marker ``gpu``): skipped without a CUDA device; run by tools/gpu_check.sh."""
