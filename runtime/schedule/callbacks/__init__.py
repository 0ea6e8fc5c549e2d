"""Python callbacks named from rule files: only the stages whose state is real.

Each module mirrors the rule file that names it: rules/schedule/rangeify.yaml
names callbacks in rulec.runtime.schedule.callbacks.rangeify, and so on.
"""
