"""Measurements of the performance contract (SPEC §10): traffic, PTX quality, compile latency, launch
overhead, and GPU timings. Each module is a script (`python bench/<name>.py`) that prints a markdown table;
see bench/README.md."""
