"""Simulation-only HDL models: the JEDEC timing checker (and the HBM2 device) as netlists, so a
simulation checks the DRAM pins without a Python call per clock cycle."""
