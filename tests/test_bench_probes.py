"""The probe files in bench/probes/ (tiles waiting for a device session) stay valid as the tile
generators change: each line a tile the set's rules accept, no tile twice, every one's WGSL
generated, the device script names only files that exist, and each variant patch applies."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from wgtune.kernels.matmul import matmul_set

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))  # bench/ is no package
import kernel_probe  # noqa: E402

PROBES = sorted((BENCH / "probes").glob("*.txt"))


def test_there_are_probe_files():
    assert {path.name for path in PROBES} >= {"tail.txt", "staircase.txt", "k-sweep.txt", "hundreds.txt", "short-k.txt"}


@pytest.mark.parametrize("path", PROBES, ids=lambda path: path.name)
def test_each_probe_file_names_distinct_valid_tiles_whose_wgsl_generates(path):
    tiles = kernel_probe.trial_tiles([f"@{path}"])
    assert tiles, f"{path.name} names no tile"
    names = [tile.name for tile in tiles]
    assert len(set(names)) == len(names), f"{path.name} names a tile twice"
    candidates = matmul_set(tiles).candidates
    assert [kernel.name for kernel in candidates[1:]] == names  # after the naive kernel, as the probe runs them
    assert all(stage.wgsl.strip() for kernel in candidates for stage in kernel.stages)


def test_the_device_script_names_existing_probe_files_and_parts():
    script = (BENCH / "probes" / "device.sh").read_text()
    named = set(re.findall(r"bench/probes/([\w-]+\.txt)", script))
    assert named and named <= {path.name for path in PROBES}
    parts = set(re.findall(r"^    ([\w:*-]+)\)", script, re.MULTILINE))
    assert parts - {"*"} == {"tail", "staircase", "staircase:*", "k-sweep", "hundreds", "short-k", "narrow", "draw",
                             "wake", "reductions", "dawn-tune", "dawn-compiles", "first-trace", "first-costs",
                             "input-copies", "short", "placement", "checks", "dawn", "probe:*", "probe-dawn:*",
                             "sweep:*", "sweep-ab:*", "stages-ab:*", "ab:*"}


def script_env(tmp_path: Path, **more: str) -> dict[str, str]:
    """device.sh's environment with a python3 that logs its arguments to ``tmp_path/calls`` and
    fails (so that no part does real work), tables going to ``tmp_path/out``."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python3").write_text("#!/bin/sh\necho \"python3 $*\" >> \"$LOG\"\nexit 1\n")
    (fake / "python3").chmod(0o755)
    (tmp_path / "out").mkdir()
    return {"PATH": f"{fake}:/usr/bin:/bin", "R": str(BENCH.parent), "OUT": str(tmp_path / "out"),
            "LOG": str(tmp_path / "calls"), **more}


@pytest.mark.parametrize(("parts", "flags"), [(["ab:example"], "--dawn"), (["draw", "dawn"], ""),
                                             (["checks"], ""), (["probe-dawn:tail"], ""), (["dawn-tune"], ""),
                                             (["dawn-compiles"], "")])
def test_the_device_script_refuses_dawn_parts_at_once_without_wgpudawn(tmp_path, parts, flags):
    """A part on Dawn's device without wgpudawn's wheel would fail tune by tune after the call began
    (session 29 lost a call so): the script says what to put in .whl/ before any part runs."""
    env, out = script_env(tmp_path, FLAGS=flags), tmp_path / "out"
    ran = subprocess.run(["bash", str(BENCH / "probes" / "device.sh"), *parts], env=env, capture_output=True,
                         text=True, timeout=60)
    assert ran.returncode == 2
    assert "wgpudawn is not installed" in ran.stderr and "pip download --no-deps wgpudawn" in ran.stderr
    assert list(out.iterdir()) == []  # no part began
    assert (tmp_path / "calls").read_text().splitlines() == ["python3 -c import wgpudawn"]


def test_the_device_script_runs_parts_off_dawn_without_asking_for_wgpudawn(tmp_path):
    env = script_env(tmp_path, FLAGS="")
    ran = subprocess.run(["bash", str(BENCH / "probes" / "device.sh"), "ab:example"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert "wgpudawn" not in ran.stderr
    assert (tmp_path / "out" / "ab-example.txt").exists()  # the part began (its install failed: no real python3)


def test_each_variant_patch_still_applies_to_this_tree_and_the_answered_ones_are_marked():
    """A variant for ``device.sh ab:NAME`` is a patch on this tree (its wheel is built from it): one
    that no longer applies after a change to the files it touches must be made again, or moved to
    ``bench/results/variant-NAME.patch`` once its question is answered (it need not apply there).
    Every variant, waiting or answered, says in its text that it is not main."""
    waiting = sorted((BENCH / "probes").glob("*.patch"))
    for patch in waiting:
        found = subprocess.run(["git", "apply", "--check", str(patch)], cwd=BENCH.parent, capture_output=True,
                               text=True)
        assert found.returncode == 0, f"{patch.name} no longer applies: {found.stderr}"
    answered = sorted((BENCH / "results").glob("variant-*.patch"))
    assert answered, "the answered variants are kept in bench/results/"
    for patch in waiting + answered:
        assert "VARIANT FOR AN A/B RUN, NOT MAIN" in patch.read_text(), patch.name


def test_the_probe_ranks_candidates_over_the_shapes_by_their_share_of_each_best():
    standings = {"b": [0.8, 1.0, 0.9], "a": [1.0, 0.5, 1.0], "c": [0.4]}
    header, *rows = kernel_probe.standing_lines(standings)
    assert "led" in header and "median" in header
    assert [row.split() for row in rows] == [["a", "3", "2", "1.000", "0.500"], ["b", "3", "1", "0.900", "0.800"],
                                             ["c", "1", "0", "0.400", "0.400"]]
    assert kernel_probe.standing_lines({"a": [1.0], "b": [0.7]}) == []  # one shape: nothing to rank over


def test_the_device_script_refuses_a_stdout_that_is_a_parts_own_table(tmp_path):
    """``device.sh draw > $OUT/draw.txt`` puts two writers on one file, which overwrite each other
    (session 31 lost most of a draw so): the script says so before any part runs."""
    env, out = script_env(tmp_path), tmp_path / "out"
    with (out / "draw.txt").open("w") as table:
        ran = subprocess.run(["bash", str(BENCH / "probes" / "device.sh"), "short", "draw"], env=env,
                             stdout=table, stderr=subprocess.PIPE, text=True, timeout=60)
    assert ran.returncode == 2 and "the table part draw writes itself" in ran.stderr, ran.stderr
    assert not (tmp_path / "calls").exists() and sorted(path.name for path in out.iterdir()) == ["draw.txt"]
    with (tmp_path / "elsewhere.txt").open("w") as other:  # any other stdout: the parts run
        subprocess.run(["bash", str(BENCH / "probes" / "device.sh"), "short"], env=env, stdout=other,
                       stderr=subprocess.PIPE, text=True, timeout=60)
    assert (out / "short.txt").exists()


def test_the_wake_and_reductions_parts_run_what_the_next_gpu_session_needs(tmp_path):
    env = script_env(tmp_path, FLAGS="", WAKE_IDLE="0")
    ran = subprocess.run(["bash", str(BENCH / "probes" / "device.sh"), "wake", "reductions"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    calls = [line.split(" ", 2)[1:] for line in (tmp_path / "calls").read_text().splitlines()]
    scripts = [Path(call[0]).name for call in calls]
    assert scripts == ["wake_probe.py", "tune_samples.py", "tune_samples.py", "first_tune.py", "first_tune.py",
                       "short_kernels.py"]
    assert "--setting default" in calls[1][1] and "--setting WGTUNE_WAKE=0" in calls[2][1]
    assert all("--isolate" in call[1] for call in calls[3:5])
    assert "--key row_sum:1024x1024" in calls[5][1] and "--key fma:3000000" in calls[5][1]
    assert {path.name for path in (tmp_path / "out").iterdir()} >= {"wake.txt", "reductions.txt"}



def test_the_first_trace_part_traces_the_first_tune_in_process_and_in_the_tuning_process(tmp_path):
    env = script_env(tmp_path, FLAGS="")
    ran = subprocess.run(["bash", str(BENCH / "probes" / "device.sh"), "first-trace"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr  # a part's failing python3 does not fail the script
    calls = [line.split(" ", 2)[1:] for line in (tmp_path / "calls").read_text().splitlines()]
    assert [Path(call[0]).name for call in calls] == ["tune_trace.py"] * 4
    assert [call[1].endswith("--isolate") for call in calls] == [False, True] * 2
    assert all("--shape 4096x4096x4096" in call[1] for call in calls)


def test_the_first_trace_part_with_a_wheel_before_traces_both_in_turn(tmp_path):
    """BEFORE=NAME: a change to the first tune's path against the wheel without it, on one GPU."""
    env = script_env(tmp_path, FLAGS="", BEFORE="pre-x", PYTHONPATH="/tmp/site")
    (tmp_path / "bin" / "python3").write_text('#!/bin/sh\necho "PYTHONPATH=$PYTHONPATH python3 $*" >> "$LOG"\n')
    ran = subprocess.run(["bash", str(BENCH / "probes" / "device.sh"), "first-trace"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert any("--target /tmp/ab_pre-x" in call and "/.whl/pre-x/" in call for call in calls)
    traced = [call for call in calls if "tune_trace.py" in call]
    assert [call.split()[0] for call in traced] == ["PYTHONPATH=/tmp/ab_pre-x:/tmp/site"] * 2 + [
        "PYTHONPATH=/tmp/site"] * 2 + ["PYTHONPATH=/tmp/ab_pre-x:/tmp/site"] * 2 + ["PYTHONPATH=/tmp/site"] * 2
    assert [call.endswith("--isolate") for call in traced] == [False, True] * 4


def test_the_first_costs_part_traces_the_first_tune_with_and_without_the_wake_the_checks_and_shared_memory(tmp_path):
    env = script_env(tmp_path, FLAGS="")
    ran = subprocess.run(["bash", str(BENCH / "probes" / "device.sh"), "first-costs"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    calls = [line.split(" ", 2)[2] for line in (tmp_path / "calls").read_text().splitlines()]
    assert all(call.startswith("--shape 4096x4096x4096 --isolate") for call in calls)
    assert [call.removeprefix("--shape 4096x4096x4096 --isolate") for call in calls] == [
        "", " --no-wake", " --no-checks", " --no-wake --no-checks", " --pipe"] * 2


def test_the_dawn_compiles_part_times_both_wheels_in_turn(tmp_path):
    """Dawn's compiles since session 34 (its own workers) against 4304a40's 16 threads, on one GPU."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python3").write_text('#!/bin/sh\necho "PYTHONPATH=$PYTHONPATH python3 $*" >> "$LOG"\n')  # succeeds
    (fake / "python3").chmod(0o755)
    (tmp_path / "out").mkdir()
    env = {"PATH": f"{fake}:/usr/bin:/bin", "R": str(BENCH.parent), "OUT": str(tmp_path / "out"),
           "LOG": str(tmp_path / "calls"), "PYTHONPATH": "/tmp/site"}
    ran = subprocess.run(["bash", str(BENCH / "probes" / "device.sh"), "dawn-compiles"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert any("--target /tmp/ab_pre-dawn" in call and "/.whl/pre-dawn/" in call for call in calls)
    timed = [call for call in calls if "first_tune.py" in call]
    assert len(timed) == 4 and all("--full --dawn --rounds 1" in call for call in timed)
    assert [call.split()[0] for call in timed] == ["PYTHONPATH=/tmp/ab_pre-dawn:/tmp/site", "PYTHONPATH=/tmp/site"] * 2
    env["BEFORE"] = "pre-width"
    (tmp_path / "calls").unlink()
    ran = subprocess.run(["bash", str(BENCH / "probes" / "device.sh"), "dawn-compiles"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    timed = [call for call in (tmp_path / "calls").read_text().splitlines() if "first_tune.py" in call]
    assert [call.split()[0] for call in timed] == ["PYTHONPATH=/tmp/ab_pre-width:/tmp/site", "PYTHONPATH=/tmp/site"] * 2
    assert (tmp_path / "out" / "dawn-compiles.txt").exists()
