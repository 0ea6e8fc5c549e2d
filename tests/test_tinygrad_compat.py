"""rulec.compat: tinygrad 0.14 scripts run on rulec unchanged (issue 11).

The real tinygrad is never imported here: every `tinygrad` module these tests see is served by rulec.
"""
from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import rulec
import rulec.compat as compat
from rulec.cli import main
from rulec.compat.tinygrad import MODULES, NotProvidedByRulec, is_compat_module, provided_names

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "tinygrad"


def _tinygrad_modules() -> dict[str, object]:
    return {n: m for n, m in sys.modules.items() if n == "tinygrad" or n.startswith("tinygrad.")}


@pytest.fixture
def layer():
    before = _tinygrad_modules()
    compat.install()
    try:
        yield
    finally:
        compat.uninstall()
    assert _tinygrad_modules() == before


def test_every_mapped_module_imports_and_its_names_are_rulecs(layer):
    import rulec.helpers
    import rulec.jit
    import rulec.nn
    from rulec.runtime.device import Device
    from rulec.runtime.ir.dtype import DType, dtypes

    for name in MODULES:
        module = importlib.import_module(name)
        assert is_compat_module(module), name
        for attr in provided_names(name):
            assert getattr(module, attr) is not None, f"{name}.{attr}"
    import tinygrad
    import tinygrad.engine.jit
    from tinygrad import nn
    from tinygrad.dtype import DType as TDType

    assert tinygrad.Tensor is rulec.Tensor and tinygrad.tensor.Tensor is rulec.Tensor
    assert tinygrad.TinyJit is rulec.jit.TinyJit and tinygrad.engine.jit.TinyJit is rulec.jit.TinyJit
    assert tinygrad.dtypes is dtypes and tinygrad.dtype.dtypes is dtypes and TDType is DType
    assert tinygrad.Device is Device and tinygrad.device.Device is Device
    assert tinygrad.Context is rulec.helpers.Context and tinygrad.helpers.getenv is rulec.helpers.getenv
    assert nn.Linear is rulec.nn.Linear and nn.Conv2d is rulec.nn.Conv2d and nn.BatchNorm2d is rulec.nn.BatchNorm2d
    # submodules reachable as attributes without importing them, as `nn.optim.Adam` in tinygrad scripts
    assert nn.optim.Adam is rulec.nn.optim.Adam and nn.state.safe_save is rulec.nn.state.safe_save
    assert set(rulec.nn.optim.__all__) <= set(dir(nn.optim))


@pytest.mark.parametrize("statement, missing", [
    ("from tinygrad import function", "tinygrad.function"),
    ("from tinygrad.helpers import fetch_fw", "tinygrad.helpers.fetch_fw"),
    ("from tinygrad.nn.state import torch_load", "tinygrad.nn.state.torch_load"),
    ("import tinygrad.nn.onnx", "tinygrad.nn.onnx"),
    ("from tinygrad.nn.onnx import OnnxRunner", "tinygrad.nn.onnx"),
    ("from tinygrad.engine.realize import run_schedule", "tinygrad.engine.realize"),
])
def test_a_name_rulec_does_not_provide_raises_an_import_error_naming_it(layer, statement, missing):
    with pytest.raises(ImportError) as e:
        exec(statement, {})
    assert isinstance(e.value, NotProvidedByRulec)
    message = str(e.value)
    assert message.startswith(f"{missing} is not provided by rulec")
    parent = missing.rsplit(".", 1)[0]
    assert f"{parent} provides" in message  # and says what the module does provide
    assert missing not in sys.modules


def test_attribute_access_to_a_missing_name_is_an_attribute_error(layer):
    import tinygrad

    assert not hasattr(tinygrad, "function")
    assert getattr(tinygrad.helpers, "fetch_fw", "default") == "default"
    with pytest.raises(AttributeError, match="tinygrad.function is not provided by rulec"):
        tinygrad.function  # noqa: B018


def test_install_and_uninstall_are_idempotent_and_restore_sys_modules(monkeypatch):
    # a "real" tinygrad already imported: install() sets it aside, uninstall() puts it back
    real, real_sub = types.ModuleType("tinygrad"), types.ModuleType("tinygrad.tensor")
    real.__file__ = "/elsewhere/tinygrad/__init__.py"
    monkeypatch.setitem(sys.modules, "tinygrad", real)
    monkeypatch.setitem(sys.modules, "tinygrad.tensor", real_sub)
    meta_path = list(sys.meta_path)
    compat.install()
    compat.install()
    try:
        assert compat.installed() and len(sys.meta_path) == len(meta_path) + 1
        import tinygrad
        from tinygrad.tensor import Tensor

        assert tinygrad is not real and is_compat_module(tinygrad) and Tensor is rulec.Tensor
    finally:
        compat.uninstall()
    compat.uninstall()
    assert not compat.installed()
    assert sys.meta_path == meta_path
    assert sys.modules["tinygrad"] is real and sys.modules["tinygrad.tensor"] is real_sub
    assert [n for n in _tinygrad_modules() if n not in ("tinygrad", "tinygrad.tensor")] == []


def test_tinygrad_layer_leaves_an_installed_layer_installed():
    compat.install()
    try:
        with compat.tinygrad_layer():
            assert compat.installed()
        assert compat.installed()
    finally:
        compat.uninstall()
    with compat.tinygrad_layer(enabled=False):
        assert not compat.installed()


NO_REAL_TINYGRAD = """
import sys
import tinygrad, tinygrad.nn.optim, tinygrad.helpers
files = {n: getattr(m, "__file__", None) for n, m in sys.modules.items() if n.split(".")[0] == "tinygrad"}
assert files and all(f is None for f in files.values()), files
assert all(getattr(m, "__rulec_compat__", False) for n, m in sys.modules.items() if n.split(".")[0] == "tinygrad")
print("served by rulec:", sorted(files))
"""


def test_rulec_run_serves_tinygrad_and_never_imports_the_real_one(tmp_path, capsys):
    script = tmp_path / "probe.py"
    script.write_text(NO_REAL_TINYGRAD)
    before = _tinygrad_modules()
    assert main(["run", "-q", str(script)]) == 0
    assert "served by rulec: ['tinygrad', 'tinygrad.helpers', 'tinygrad.nn', 'tinygrad.nn.optim'" in capsys.readouterr().out
    assert _tinygrad_modules() == before  # and nothing is left behind


def test_no_tinygrad_leaves_the_import_to_the_real_package(tmp_path, capsys):
    fake = tmp_path / "tinygrad"
    fake.mkdir()
    (fake / "__init__.py").write_text("WHO = 'the package on sys.path'\n")
    script = tmp_path / "who.py"
    script.write_text("import tinygrad\nprint(getattr(tinygrad, 'WHO', 'rulec'))\n")
    try:
        assert main(["run", "-q", "--no-tinygrad", str(script)]) == 0
        assert capsys.readouterr().out.strip() == "the package on sys.path"
    finally:
        for n in list(_tinygrad_modules()):
            if getattr(sys.modules[n], "__file__", None) and str(tmp_path) in sys.modules[n].__file__:
                del sys.modules[n]
    assert main(["run", "-q", str(script)]) == 0
    assert capsys.readouterr().out.strip() == "rulec"


def test_python_m_rulec_compat_runs_a_script(tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(NO_REAL_TINYGRAD + "import sys\nsys.exit(int(sys.argv[1]))\n")
    env = dict(os.environ)
    res = subprocess.run([sys.executable, "-m", "rulec.compat", str(script), "3"], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=120)
    assert res.returncode == 3, res.stderr
    assert "served by rulec" in res.stdout
    res = subprocess.run([sys.executable, "-m", "rulec.compat", str(tmp_path / "missing.py")], capture_output=True,
                         text=True, env=env, cwd=tmp_path, timeout=120)
    assert res.returncode == 2 and "no such file" in res.stderr


# ------------------------------------------------------------------ the examples, run by `rulec run`

@pytest.fixture
def leaves_no_tinygrad():
    """The run imports no tinygrad module of its own: the layer's are gone after it, and no other appears."""
    before = _tinygrad_modules()
    yield
    assert _tinygrad_modules() == before


def test_example_inference_runs_and_matches_float64_numpy(capsys, leaves_no_tinygrad):
    assert main(["run", "-q", "--check", str(EXAMPLES / "infer_cnn.py")]) == 0
    out = capsys.readouterr().out
    assert "logits shape (4, 5) dtype True" in out
    assert "probabilities sum to one: True" in out
    assert re.search(r"predicted classes \[[0-4], [0-4], [0-4], [0-4]\]", out)


def test_example_helpers_runs_and_counts_kernels(capsys, leaves_no_tinygrad):
    assert main(["run", "-q", "--check", str(EXAMPLES / "helpers_counters.py")]) == 0
    out = capsys.readouterr().out
    kernels = int(re.search(r"attention output \(1, 2, 16, 8\), kernels (\d+)", out).group(1))
    assert kernels >= 1
    # causal attention: only the last query sees the last value row
    assert "rows changed by v's last row [15]" in out
    for line in ("training outside a Context: False", "training inside Context(TRAINING=1): True",
                 "dropout(0.25) keeps about 3/4: True", "dropout when not training is the identity: True"):
        assert line in out


def test_example_training_learns_in_a_few_steps(capsys, monkeypatch, leaves_no_tinygrad):
    monkeypatch.setenv("STEPS", "20")
    assert main(["run", "-q", str(EXAMPLES / "train_digits.py")]) == 0
    out = capsys.readouterr().out
    losses = [float(v) for v in re.findall(r"step +\d+ loss ([\d.]+)", out)]
    accuracy = float(re.search(r"test accuracy ([\d.]+)%", out).group(1))
    # chance is 10% and a loss of ln(10) = 2.30; tinygrad 0.14 prints 1.3174 and 57.58% for the same run
    assert losses and losses[-1] < 0.8 * np.log(10)
    assert accuracy > 30.0
    assert "reloaded model agrees on 100.00% of the test set" in out


BATCHNORM_TRAINING = """
import numpy as np
from tinygrad import Tensor, nn
from tinygrad.helpers import Context
from tinygrad.nn.state import get_parameters
bn, lin = nn.BatchNorm2d(2), nn.Linear(8, 1)
opt = nn.optim.SGD(get_parameters([bn, lin]), lr=0.1)
with Context(TRAINING=1):
  opt.zero_grad()
  lin(bn(Tensor(np.arange(16, dtype=np.float32).reshape(2, 2, 2, 2))).flatten(1)).sum().backward()
  opt.step()
# the running statistics are state: realized with the step, not trained
assert len(opt.params) == 4 and not bn.running_mean.is_param
x = np.arange(16, dtype=np.float32).reshape(2, 2, 2, 2)
np.testing.assert_allclose(bn.running_mean.numpy(), 0.1 * x.mean(axis=(0, 2, 3)), rtol=1e-6)
assert bn.num_batches_tracked.numpy().tolist() == 1
"""


def test_an_optimizer_over_a_batchnorm_trains_as_in_tinygrad(tmp_path, capsys):
    script = tmp_path / "bn.py"
    script.write_text(BATCHNORM_TRAINING)
    assert main(["run", "-q", str(script)]) == 0


# ------------------------------------------------------------------ rulec.helpers, as tinygrad.helpers

def test_global_counters_count_the_kernels_realize_runs():
    from rulec.helpers import GlobalCounters
    from rulec.runtime.tensor import realize

    a, b = rulec.Tensor(np.ones((4, 8), np.float32)).realize(), rulec.Tensor(np.ones((8,), np.float32)).realize()
    expected = [i for i in realize.schedule((a * 2 + b).sum(axis=1) + 1) if not i.is_copy]
    GlobalCounters.reset()
    assert (GlobalCounters.kernel_count, GlobalCounters.global_mem) == (0, 0)
    out = ((a * 2 + b).sum(axis=1) + 1).realize()
    assert GlobalCounters.kernel_count == len(expected) >= 1
    assert GlobalCounters.global_mem == sum(b.arg * b.dtype.itemsize for i in expected for b in i.buffers)
    assert GlobalCounters.time_sum_s > 0
    np.testing.assert_allclose(out.numpy(), np.full(4, 25.0))
    # value ops, as tinygrad counts them: 4x8 muls and adds, 4x8 accumulates, 4 adds (index arithmetic is not)
    assert GlobalCounters.global_ops == sum(i.ops for i in expected) == 4 * 8 * 3 + 4


def test_global_ops_of_a_matmul_is_two_flops_per_multiply_add():
    from rulec.helpers import GlobalCounters

    a = rulec.Tensor(np.ones((6, 5), np.float32)).realize()
    b = rulec.Tensor(np.ones((5, 7), np.float32)).realize()
    GlobalCounters.reset()
    (a @ b).realize()
    assert GlobalCounters.global_ops == 2 * 6 * 5 * 7 and GlobalCounters.kernel_count == 1
    GlobalCounters.reset()
    assert GlobalCounters.global_ops == 0


def test_settings_as_objects_follow_context():
    from rulec.helpers import BEAM, TRAINING, Context

    assert not TRAINING and TRAINING == 0
    with Context(TRAINING=1, BEAM=2):
        assert TRAINING and TRAINING.value == 1 and BEAM >= 2 and rulec.Tensor.training
    assert not TRAINING and not rulec.Tensor.training


def test_trange_iterates_and_shows_progress_on_stderr(capsys):
    from rulec.helpers import colored, trange

    t = trange(5)
    seen = []
    for i in t:
        seen.append(i)
        t.set_description(f"at {i}")
    out, err = capsys.readouterr()
    assert seen == [0, 1, 2, 3, 4] and out == ""
    assert "at 4: 5/5" in err
    assert colored("x", "red") == "\x1b[31mx\x1b[0m" and colored("x", None) == "x"
    with pytest.raises(ValueError, match="unknown color 'pink'"):
        colored("x", "pink")
