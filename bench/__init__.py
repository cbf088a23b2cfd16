"""Benchmarks, load, soak and fault scripts for stszone (loopback only; each stops by itself)."""
