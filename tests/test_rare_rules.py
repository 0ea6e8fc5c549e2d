"""tests/programs/rare_rules.py: each rule that ordinary programs do not reach, on a graph built to need it."""
import runpy
from pathlib import Path


def test_every_rare_rule_fires_and_makes_what_it_should(capsys):
    runpy.run_path(str(Path(__file__).parent / "programs" / "rare_rules.py"), run_name="__main__")
    assert "22 rare-rule cases rewrite as expected" in capsys.readouterr().out
