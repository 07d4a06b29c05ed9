from kernelrt import CUDABackend
import numpy as np
from numba import cuda

@cuda.jit
def vector_add(a, b, c):
    i = cuda.grid(1)
    if i < len(c):
        c[i] = a[i] + b[i]

# Compile and launch
backend = CUDABackend()

a = np.random.randn(100_000).astype(np.float32)  # setup: the page leaves a and b undefined
b = np.random.randn(100_000).astype(np.float32)  # setup

a_gpu = backend.to_device(a)
b_gpu = backend.to_device(b)
c_gpu = backend.allocate(a.shape)

threads_per_block = 256
blocks = (len(a) + threads_per_block - 1) // threads_per_block

backend.launch_kernel(
    vector_add,
    (blocks,),  # the page: grid=(blocks,), a keyword before positional arguments (a SyntaxError)
    (threads_per_block,),  # the page: block=(threads_per_block,)
    a_gpu, b_gpu, c_gpu
)

backend.synchronize()
result = backend.to_host(c_gpu)
