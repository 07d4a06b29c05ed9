from kernelrt import CUDABackend
import numpy as np

backend = CUDABackend()

# Check available memory
free, total = backend.get_memory_info()
print(f"GPU Memory: {free / 1e9:.1f} GB free / {total / 1e9:.1f} GB total")

# Allocate based on available memory
max_elements = free // 4  # float32 = 4 bytes
arr = backend.allocate((min(max_elements, 1_000_000),), dtype=np.float32)
