"""The scheduler: the pipeline driver, the pure helpers its rule files call, its callbacks, and the kernel checks."""
