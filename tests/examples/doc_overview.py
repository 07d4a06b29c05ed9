from kernelrt import CUDABackend

if CUDABackend.check_available():
    backend = CUDABackend()
