"""The benchmark workloads and their bare-trio floors, run by ``trio-agent bench``."""
