"""The cotangent-Laplacian family on the CPU backend: golden parity with SpectralBrain, oracles, inputs, products."""
