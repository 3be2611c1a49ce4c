"""Simulated devices on loopback: protocol servers the simulated fabric and the tests build on."""
