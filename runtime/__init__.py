"""The rulec runtime: the UOp IR, the rewrite engines and everything that runs rules."""
