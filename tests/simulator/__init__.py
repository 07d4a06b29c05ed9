"""CUDABackend and the CUDA kernels under Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1, its own process)."""
