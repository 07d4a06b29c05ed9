from kernelrt import CUDABackend
import numpy as np


def my_func(x):  # setup: the page leaves my_func undefined; a kernel taking one float32
    y = x * x


# Enable caching (default)
backend = CUDABackend(enable_caching=True)

# First call compiles
kernel = backend.compile_kernel(my_func, (np.float32,))

# Subsequent calls use cached version
kernel = backend.compile_kernel(my_func, (np.float32,))  # Fast
