"""The engines that run compiled rules (python and egglog), tracing, and the loading of build artifacts."""
