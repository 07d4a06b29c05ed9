"""What ``help()`` shows a user: the constructors, their errors and the signature forms."""

import pydoc

import kernelrt

# a string of types, the same in void(...) form, and tuple entries of each kind
SIGNATURE_FORMS = ['[::1], int64"', '"void(float32[::1]', "numba.float32[::1]", "np.float32", "complex",
                   '"float32[::1]"']


def help_text(obj) -> str:
    return pydoc.render_doc(obj, renderer=pydoc.plaintext)  # what help(obj) prints


def test_cuda_backend_help_documents_arguments_errors_and_signatures():
    text = help_text(kernelrt.CUDABackend)
    for word in ("device_id:", "enable_caching:", "cache_dir:", "debug:", "arrays:", "RuntimeError",
                 "CudaUnavailableError", "TypeError", *SIGNATURE_FORMS):
        assert word in text, word


def test_cpu_backend_and_compile_kernel_help():
    text = help_text(kernelrt.CPUBackend)
    assert "device_id: must be 0" in text and "ValueError" in text
    text = help_text(kernelrt.Backend.compile_kernel)
    for word in (*SIGNATURE_FORMS, 'np.dtype("float32")', "denote scalars", "TypeError"):
        assert word in text, word
