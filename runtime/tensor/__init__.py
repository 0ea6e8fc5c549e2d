"""The tinygrad-compatible Tensor frontend and realization."""
