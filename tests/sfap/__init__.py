"""The SFAP family on the CPU backend: golden parity with MyoGen, host preparation, properties, inputs."""
