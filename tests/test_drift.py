"""The reference kernel between calibrate's probe groups (measure/drift.py): scripted reference
timings, load and clocks, so that every drift below is worked out by hand and nothing races a
real timer. The end-to-end tests at the bottom run a tiny real calibration (torch) whose reference
is scripted the same way."""

import dataclasses
import json

import pytest

from roofline.errors import RooflineError
from roofline.measure.drift import (DRIFT_BOUND, MAX_REPEATS, SETTLE_TRIES, DriftError, DriftGuard, ReferenceRun,
                                    compare)

US = 1e-6


def guard(times, allow=False, threads=1):
    """A DriftGuard whose reference takes the scripted ``times`` (us) in turn (the last one for ever
    after), load average 1.5 at the start and 2.5 at the end, 3 CPU seconds in 4 wall seconds."""
    script, loads, cpu, wall = list(times), iter([1.5, 2.5]), iter([10.0, 13.0]), iter([100.0, 104.0])

    def timer():
        return (script.pop(0) if len(script) > 1 else script[0]) * US

    return DriftGuard(timer, "fp32 matmul 8x8x8", 8, allow=allow, threads=threads, loadavg=lambda: next(loads),
                      cpu_clock=lambda: next(cpu), wall_clock=lambda: next(wall))


def counted(calls, name):
    def fn():
        calls.append(name)
        return name
    return fn


def test_a_quiet_run_records_its_drift_and_load():
    calls = []
    g = guard([100, 104, 102])  # before a, after a (= before b), after b
    assert g.run("a", counted(calls, "a")) == "a" and g.run("b", counted(calls, "b")) == "b"
    run = g.finish()
    assert calls == ["a", "b"] and run.repeats == 0 and not run.allowed and not run.beyond
    assert run.reference_s == pytest.approx((100 * US, 104 * US, 102 * US))
    assert run.drift == pytest.approx(1.04)  # 104 / 100
    assert (run.load_start, run.load_end) == (1.5, 2.5)
    assert run.cpu_share == pytest.approx(0.75)  # 3 CPU s / (4 wall s x 1 thread)
    assert run.settled_s == pytest.approx(103 * US)  # median of the kept 100, 104, 104, 102


def test_a_disturbed_group_is_measured_again_and_kept_when_quiet():
    calls = []
    # before a 100; after a 150 (a busy spell): the reference timed until back within 10%: 100; a again, after 101
    g = guard([100, 150, 100, 101])
    g.run("a", counted(calls, "a"))
    g.settle()  # nothing left to settle: a was measured again at once
    run = g.finish()
    assert calls == ["a", "a"] and run.repeats == 1 and not run.beyond
    assert run.kept_s == pytest.approx((100 * US, 101 * US)) and run.drift == pytest.approx(1.5)


def test_a_run_that_stays_disturbed_is_repeated_then_refused():
    calls = []
    g = guard([100, 150])  # 150 us after the first group, for ever
    g.run("a", counted(calls, "a"))
    g.settle()  # no repeat left
    with pytest.raises(DriftError) as err:
        g.finish()
    assert calls == ["a"] * (1 + MAX_REPEATS)  # measured, then repeated MAX_REPEATS times
    run = err.value.run
    assert err.value.field == "allow_drift" and isinstance(err.value, RooflineError)
    assert run.kept_drift == pytest.approx(1.5) and run.bound == DRIFT_BOUND and run.repeats == MAX_REPEATS
    # each repeat first waits SETTLE_TRIES reference timings for the machine to settle
    assert len(run.reference_s) == 1 + (1 + MAX_REPEATS) + MAX_REPEATS * SETTLE_TRIES
    assert "+50%" in str(err.value) and "1.50 at the start" in str(err.value)  # the drift and the load, named


def test_allow_drift_keeps_the_figures_and_says_so():
    g = guard([100, 150], allow=True)
    g.run("a", lambda: "a")
    run = g.finish()
    assert run.allowed and run.beyond and g.results["a"] == "a"


def test_a_group_kept_beside_a_slow_start_is_measured_again_once_the_machine_is_quicker():
    calls = []
    # a: 150 before and after (steady at its level); b: 150 before, 100 after (the machine quickened during b):
    # b again (100, 100). The run's quickest is now 100, so a's figures were measured beside a reference
    # 50% slower: settle measures a again (before 100, after 100)
    g = guard([150, 150, 100])
    g.run("a", counted(calls, "a"))
    g.run("b", counted(calls, "b"))
    g.settle()
    run = g.finish()
    assert calls == ["a", "b", "b", "a"] and run.repeats == 2 and not run.beyond
    assert max(run.kept_s) == pytest.approx(100 * US)


def test_check_compares_against_the_settled_reference():
    run = ReferenceRun("fp32 matmul 8x8x8", 8, (100 * US, 102 * US), (100 * US, 102 * US), load_end=1.0)
    quiet, busy = compare(run, 105 * US), compare(run, 140 * US, 3.0)
    assert not quiet.moved and busy.moved and busy.ratio == pytest.approx(140 / 101)
    assert (busy.then_s, busy.now_s, busy.load_then, busy.load_now) == (pytest.approx(101 * US), 140 * US, 1.0, 3.0)
    assert compare(run, 80 * US).moved  # quicker beyond the bound moved too: 101 / 80 > 1.1


def test_the_reference_round_trips_through_the_profile_and_old_profiles_load(tmp_path):
    from test_calibrated import synthetic

    from roofline.measure.machine_file import load_profile, write_profile

    run = ReferenceRun("fp32 matmul 8x8x8", 8, (1e-4, 1.2e-4), (1e-4,), 0.1, 1, True, 0.5, 0.75, 0.9)
    cal = dataclasses.replace(synthetic(), reference=run)
    assert load_profile(write_profile(cal, tmp_path / "new.toml"))[1].reference == run
    old = synthetic()  # a profile written before the reference: no [calibration.KEY.reference] table
    assert load_profile(write_profile(old, tmp_path / "old.toml"))[1].reference is None
    text = (tmp_path / "new.toml").read_text().replace("n = 8", "n = -8")
    (tmp_path / "bad.toml").write_text(text)
    with pytest.raises(RooflineError, match="reference n = -8"):
        load_profile(tmp_path / "bad.toml")


# ---------------------------------------------------------------------------------------------
# end to end: a tiny real calibration, its reference scripted
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def scripted(monkeypatch):
    """calibrate's reference replaced by a script of times (us); returns a setter."""
    pytest.importorskip("torch")
    import roofline.measure.calibration as cal_mod

    def use(times):
        script = list(times)
        monkeypatch.setattr(cal_mod, "drift_timer", lambda *a, **k: lambda: (script.pop(0) if len(script) > 1
                                                                            else script[0]) * US)
    return use


def test_calibrate_refuses_a_drifting_run_and_writes_nothing(tmp_path, scripted, monkeypatch, capsys):
    from test_measure import TINY

    import roofline.measure.calibration as cal_mod
    from roofline.cli import main
    from roofline.measure.machine_file import load_profile

    monkeypatch.setattr(cal_mod, "default_plan", lambda *a, **k: TINY)
    scripted([100, 100, 130])  # launch quiet, then 30% slower for the rest of the run
    out = tmp_path / "p.toml"
    assert main(["calibrate", "--budget", "1", "--threads", "1", "--quiet", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--allow-drift" in err and "+30%" in err
    assert not out.exists()
    scripted([100, 100, 130])
    assert main(["calibrate", "--budget", "1", "--threads", "1", "--quiet", "--allow-drift", "-o", str(out)]) == 0
    assert "--allow-drift kept figures" in capsys.readouterr().out
    ref = load_profile(out)[1].reference
    assert ref.allowed and ref.kept_drift == pytest.approx(1.3)


def test_check_says_when_the_machine_moved_since_calibrating(tmp_path, scripted, monkeypatch, capsys):
    from test_measure import CHECK, TINY

    import roofline.measure.reference as reference
    from roofline.cli import main
    from roofline.measure import calibrate
    from roofline.measure.machine_file import write_profile

    scripted([100, 101, 100])  # a quiet calibration: the reference settled at ~100 us
    profile = write_profile(calibrate("cpu", "fp32", 1.0, None, plan=TINY, threads=1), tmp_path / "p.toml")
    for now_us, moved in ((104, False), (150, True)):
        monkeypatch.setattr(reference, "reference_timer", lambda *a, now=now_us, **k: lambda: now * US)
        assert main(["check", "--machine", str(profile), *CHECK, "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["machine_moved"] is moved and report["reference_now_s"] == pytest.approx(now_us * US)
        assert report["reference_then_s"] == pytest.approx(100 * US, rel=0.011)
        assert any(n.startswith("the machine moved since calibrating") for n in report["notes"]) is moved


def test_profile_says_when_the_machine_moved_since_calibrating(tmp_path, monkeypatch, capsys):
    """`roofline profile TRACE --machine PROFILE` times the reference again where the profile was
    measured on this machine (its device name), and says so when it moved beyond the bound."""
    pytest.importorskip("torch")
    from test_calibrated import synthetic

    import roofline.measure.drift as drift
    import roofline.measure.reference as reference
    from roofline.cli import main
    from roofline.measure.device import device_info
    from roofline.measure.machine_file import write_profile

    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1,
                                                  "ts": 0, "dur": 50, "args": {"Input Dims": [[64, 64], [64, 64]]}}]}))
    run = ReferenceRun("fp32 matmul 8x8x8", 8, (100 * US,), (100 * US,), load_end=1.0)
    timed = []

    def timer(*a, **k):
        timed.append(1)
        return lambda: 150 * US  # 50% slower than when calibrated

    monkeypatch.setattr(reference, "reference_timer", timer)
    for name, moved in ((device_info("cpu").name, True), ("another CPU", False)):
        cal = dataclasses.replace(synthetic(), device_name=name, reference=run)
        profile = write_profile(cal, tmp_path / "p.toml")
        assert main(["profile", str(trace), "--machine", str(profile), "--json"]) == 0
        notes = json.loads(capsys.readouterr().out)["notes"]
        assert any(n == compare(run, 150 * US, drift.load_average()).text() or
                   n.startswith("the machine moved since calibrating") for n in notes) is moved
    assert timed == [1]  # not timed for a profile of another machine (a trace read away from it)


def test_a_process_that_shared_its_cores_is_said_busy():
    # 3 CPU s in 4 wall s on 1 thread: 75%, under the 80% floor; on 2 threads 37.5%
    assert guard([100], threads=1).finish().shared
    g = guard([100])
    g.cpu_clock = iter([13.6]).__next__  # 3.6 CPU s of 4: 90%
    assert not g.finish().shared
