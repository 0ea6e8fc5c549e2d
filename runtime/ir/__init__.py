"""The IR: ops, dtypes, the UOp, shapes, value bounds and the ALU semantics table."""
