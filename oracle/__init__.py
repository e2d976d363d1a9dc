"""Reference (oracle) implementations used to check generated kernels."""
