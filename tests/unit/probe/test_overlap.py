"""The image's GPU stack (rmm, CuPy) is imported while the driver initialises.

Importing CuPy needs no GPU and took about as long as ``cuInit`` on the H200 (docs/probe.md), so
the probe imports rmm and CuPy in a thread beside the driver checks; the ``rmm`` and ``cupy``
checks then see exactly what importing there would have given. The fake driver and the fake CuPy
(harness.py) meet only if the import runs while ``cuInit`` does: run one after the other, each
waits 5 s for the other and fails.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest

from dask_gpu_parity import probe

from .harness import CHECKS, Fakes, run_probe


def test_cupy_is_imported_while_cuinit_runs(fakes: Fakes, tmp_path: Path) -> None:
    meet = tmp_path / "rendezvous"
    meet.mkdir()
    run = run_probe(fakes, tmp_path, {"FAKE_RENDEZVOUS": str(meet)}, form="modules")
    assert run.code == 0, run.summary.get("reason")
    assert run.results()["cuda-init"] == "pass"
    assert run.results()["cupy"] == "pass"
    assert {"rmm", "cupy"} <= set(run.summary["import_ms"])
    assert (meet / "import").exists()
    assert (meet / "cuinit").exists()


def test_a_cupy_that_cannot_be_imported_fails_its_own_check_with_the_same_line(
    fakes: Fakes, tmp_path: Path
) -> None:
    run = run_probe(fakes, tmp_path, {"FAKE_CUPY_IMPORT_ERROR": "1"}, form="modules")
    assert run.code == 1
    assert run.summary["failed_check"] == "cupy"
    message = (
        "Expected cupy.zeros(1).get() to work on Fake H200, it raised ImportError: "
        "libnvrtc.so.13: cannot open shared object file: No such file or directory: check the "
        "image's cupy build against the driver's CUDA"
    )
    assert run.summary["reason"] == message
    assert run.stderr == message + "\n"
    assert run.termination == message + "\n"
    assert run.results()["rmm"] == "pass"
    assert [c["name"] for c in run.summary["checks"]] == CHECKS


def test_an_earlier_failure_is_the_verdict_whatever_the_import_does(
    fakes: Fakes, tmp_path: Path
) -> None:
    env = {"FAKE_CUPY_IMPORT_ERROR": "1", "FAKE_CUDA_INIT_ERROR": "803"}
    run = run_probe(fakes, tmp_path, env, form="modules")
    assert run.code == 1
    assert run.summary["failed_check"] == "cuda-init"
    assert "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH" in run.summary["reason"]
    assert "rmm" not in run.results()
    assert "cupy" not in run.results()
    assert run.stderr.count("\n") == 1


def test_an_absent_stack_is_skipped_as_before(fakes: Fakes, tmp_path: Path) -> None:
    run = run_probe(fakes, tmp_path, {"FAKE_RENDEZVOUS": ""})  # no rmm, no CuPy on the path
    assert run.code == 0, run.stderr
    assert run.results()["rmm"] == run.results()["cupy"] == "skip"
    assert "import_ms" not in run.summary


def test_each_outcome_is_what_importing_there_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken_stack.py").write_text("raise RuntimeError('no CUDA runtime here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    imports = probe._Imports(("json", "not_installed_anywhere", "broken_stack", "os.path.child"))
    imports.start()
    assert imports.outcome("json") is json
    assert imports.outcome("not_installed_anywhere") is None
    error = imports.outcome("broken_stack")
    assert isinstance(error, RuntimeError)
    assert str(error) == "no CUDA runtime here"
    with pytest.raises(ModuleNotFoundError, match=r"os\.path"):  # find_spec's own failure: exit 2
        imports.outcome("os.path.child")
    imports.join(timeout=5)
    assert not imports.is_alive()
    sys.modules.pop("broken_stack", None)


def test_a_probe_used_on_its_own_imports_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe, "_FRAMEWORKS", ("not_installed_anywhere", "json"))
    imports = probe._Imports(probe._FRAMEWORKS)
    assert imports.outcome("json") is json  # never started: imported in the caller's thread
    assert imports.ident is None


@pytest.mark.usefixtures("no_driver")
def test_in_process_main_leaves_no_import_thread_and_the_switch_interval_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`dask-gpu-parity verify-gpu` calls main(argv) in process."""

    interval = sys.getswitchinterval()
    assert probe.main(["--termination-log", str(tmp_path / "log")]) == 1
    assert json.loads(capsys.readouterr().out)["failed_check"] == "libraries"
    assert sys.getswitchinterval() == interval
    alive = [t for t in threading.enumerate() if t.name == "gpu-parity-imports" and t.is_alive()]
    assert not alive


@pytest.mark.parametrize(
    "env",
    [{"CUDA_VISIBLE_DEVICES": ""}, {"NVIDIA_VISIBLE_DEVICES": "none"}],
    ids=["cuda-visible-devices-empty", "nvidia-visible-devices-none"],
)
def test_a_failure_the_env_alone_shows_imports_nothing(
    fakes: Fakes, tmp_path: Path, env: dict[str, str]
) -> None:
    meet = tmp_path / "rendezvous"
    meet.mkdir()
    run = run_probe(fakes, tmp_path, {**env, "FAKE_RENDEZVOUS": str(meet)}, form="modules")
    assert run.code == 1
    assert run.summary["failed_check"] == "visible-devices"
    assert not (meet / "import").exists()  # the fake CuPy marks its import there
    assert "import_ms" not in run.summary
