from kernelrt import CUDABackend
import numpy as np

# Create backend
backend = CUDABackend(device_id=0)

# Allocate GPU arrays
a_gpu = backend.to_device(np.random.randn(1000).astype(np.float32))
b_gpu = backend.to_device(np.random.randn(1000).astype(np.float32))
c_gpu = backend.allocate((1000,), dtype=np.float32)

# Use CuPy for computation
import numpy as cp  # the page: import cupy as cp
c_gpu = a_gpu + b_gpu

# Copy result back
result = backend.to_host(c_gpu)
