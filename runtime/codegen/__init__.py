"""Kernel lowering: rules/codegen/ pipelines turn a kernel AST into loops, registers and gated memory
access; the linearizer orders the result for the backends' renderers."""
