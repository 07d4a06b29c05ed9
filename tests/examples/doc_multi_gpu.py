from kernelrt import CUDABackend

# Use specific GPU
backend_0 = CUDABackend(device_id=0)
backend_1 = CUDABackend(device_id=1)

print(f"GPU 0: {backend_0.device_name}")
print(f"GPU 1: {backend_1.device_name}")

# Allocate on different GPUs
data_gpu0 = backend_0.allocate((1000,))
data_gpu1 = backend_1.allocate((1000,))
