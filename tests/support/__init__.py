"""What the test modules share: layer markers, test kernels, golden cases (importable as tests.support)."""
