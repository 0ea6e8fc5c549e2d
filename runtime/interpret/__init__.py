"""The numpy reference interpreter of kernel ASTs and the lazy evaluator: the oracles."""
