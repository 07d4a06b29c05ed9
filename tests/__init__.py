"""kernelrt's test suite, a package: helpers import as ``tests.support.*`` wherever pytest runs."""
