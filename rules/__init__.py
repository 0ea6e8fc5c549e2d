"""Data only: the op table and the rule files, installed as `rulec.rules` so they ship with rulec."""
