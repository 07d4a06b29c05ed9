"""kernelrt's kernel library (imported as kernelrt.kernels)."""
