"""kernelrt inside its peers' own APIs (kernelrt.integrations): parity, the switch, the peers' own suites."""
